package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The scale run (pushfan-bench scale, make bench-scale): one `pushfan
// serve` at its default configuration on SCALE_N tokens (10M by default,
// two per user, in 16 zones), the emulator at LATENCY (5 ms by default
// here). It measures what an operator of a large app gets:
//
//   - the submit's answer time for every kind of audience and delivery;
//   - how long until targeted is known, and until the first send;
//   - the sends per second over the first 60 s of an "all", second by
//     second, against the rate limit;
//   - how long a cancel takes to be final in each state;
//   - a 3-user send on an idle table, and with 20 local-time broadcasts
//     of 1M tokens each waiting (on a second database of 1M tokens);
//   - the serve process's peak RSS;
//   - what a category's consent costs a plan: an advertising "all" with
//     consent on half the users and Korea's night window, against a plain
//     one (scaleconsent.go);
//   - a three-condition segment: the preview's estimate and exact count,
//     and its plan against a plain "all" (scalesegment.go);
//   - what PUSHFAN_STALE_AFTER costs: with a quarter of the tokens 40
//     days old, the preview, the plan and a walk of every token by the
//     send's page statement (rows read), the rule off and at 30 days;
//   - first, a broadcast's checkpoint latency beside a retention pass over
//     RETENTION_EVENTS expired engagement events (retention.go).
//
// Targets: every submit ≤ 1 s, ≥ 97 % of the rate limit from the first
// second, every cancel ≤ 1 s, RSS ≤ 150 MB.

const scaleZoneCount = 16

// scalePhase reports whether the scale run measures phase (SCALE_PHASES,
// a comma-separated subset of retention, kinds, minute, cancels, consent,
// segment, stale, waiting;
// all by default): a partial run is for looking into one figure.
func (o options) scalePhase(phase string) bool {
	return o.scalePhases == "" || slices.Contains(strings.Split(o.scalePhases, ","), phase)
}

// scaleZones are the 16 fixed-offset IANA zones users are spread over.
func scaleZones() []string {
	var z []string
	for h := 1; h <= 8; h++ {
		z = append(z, fmt.Sprintf("Etc/GMT-%d", h), fmt.Sprintf("Etc/GMT+%d", h))
	}
	return z
}

// scaleAudienceYAML is the named audience the scale run submits to.
const scaleAudienceYAML = "audiences:\n  - name: everyone\n    description: every valid token, splittable\n    sql: |\n" +
	"      SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t JOIN users u ON u.id = t.user_id\n" +
	"      WHERE t.id > :after AND t.id <= :upto AND t.invalidated_at IS NULL AND u.push_enabled = 1\n" +
	"      ORDER BY t.id LIMIT :limit\n"

func (b *bench) runScale(ctx context.Context, rep *report) error {
	if b.o.scalePhase("retention") {
		if err := b.runRetention(ctx, rep); err != nil {
			return fmt.Errorf("retention phase: %w", err)
		}
		if b.o.scalePhases == "retention" {
			return nil
		}
	}
	n := b.o.scaleN
	sr := &scaleReport{Tokens: n, Zones: scaleZoneCount, SubmitMS: map[string]float64{}, TargetedKnown: map[string]float64{},
		CancelMS: map[string]float64{}, RateLimit: 9900}
	rep.Scale = sr
	db, seedSecs, err := b.zonedDB(ctx, "scale", n)
	if err != nil {
		return err
	}
	sr.SeedSeconds = seedSecs
	var small benchDB
	if b.o.scalePhase("waiting") {
		if small, _, err = b.zonedDB(ctx, "scale_waiting", 1_000_000); err != nil {
			return err
		}
	}
	restore, err := b.fitBufferPool(ctx, db, sr)
	if err != nil {
		return err
	}
	defer restore()
	emu, err := b.emulator(ctx, 0)
	if err != nil {
		return err
	}
	cfgFile := filepath.Join(b.dir, "scale.yaml")
	if err := os.WriteFile(cfgFile, []byte(scaleAudienceYAML), 0o600); err != nil {
		return err
	}
	svc, err := b.scaleService(ctx, emu, db, "serve-scale", "PUSHFAN_CONFIG="+cfgFile)
	if err != nil {
		return err
	}
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	m := &scaleMeasure{b: b, svc: svc, emu: emu, db: conn, sr: sr}
	stopRSS := m.sampleRSS(ctx)
	defer stopRSS()
	if b.o.scalePhase("kinds") {
		if err := m.allKinds(ctx); err != nil {
			return err
		}
	}
	if b.o.scalePhase("minute") {
		if err := m.firstMinute(ctx); err != nil {
			return err
		}
	}
	if b.o.scalePhase("cancels") {
		m.setPhase("cancels")
		if err := m.cancels(ctx); err != nil {
			return err
		}
	}
	hwm, err := procStatusKB(svc.p.pid(), "VmHWM")
	if err != nil {
		return err
	}
	sr.PeakRSSMB = float64(hwm) / 1024
	svc.stop()
	if b.o.scalePhase("consent") {
		// Its own serve, with the categories, on the same tokens: before
		// the stale phase, which marks a quarter of them stale.
		if err := m.consentCost(ctx); err != nil {
			return err
		}
	}
	if b.o.scalePhase("segment") {
		// Its own serve, the plan attribute declared; it writes platforms
		// and app versions over the tokens.
		if err := m.segmentCost(ctx); err != nil {
			return err
		}
	}
	if b.o.scalePhase("stale") {
		// Its own serves, one per setting, on the same tokens: last of
		// the 10M phases, as it marks a quarter of them stale.
		if err := m.staleCost(ctx); err != nil {
			return err
		}
	}
	if !b.o.scalePhase("waiting") {
		rep.scaleTargets()
		return nil
	}

	// The 3-user send, on a 1M-token database: idle, then with 20
	// local-time broadcasts of all its tokens waiting.
	wsvc, err := b.scaleService(ctx, emu, small, "serve-waiting")
	if err != nil {
		return err
	}
	defer wsvc.stop()
	wconn, err := sql.Open("mysql", small.dsn)
	if err != nil {
		return err
	}
	defer wconn.Close()
	wm := &scaleMeasure{b: b, svc: wsvc, emu: emu, db: wconn, sr: sr}
	// Both samplers write sr.RSSByPhase: the first stops before the
	// second starts.
	stopRSS()
	stopWaitingRSS := wm.sampleRSS(ctx)
	defer stopWaitingRSS()
	wm.setPhase("20 waiting broadcasts and 3-user sends (1M tokens)")
	if err := wm.urgentWithWaiting(ctx); err != nil {
		return err
	}
	if hwm, err := procStatusKB(wsvc.p.pid(), "VmHWM"); err == nil {
		sr.PeakRSSMB = max(sr.PeakRSSMB, float64(hwm)/1024)
	}
	rep.scaleTargets()
	return nil
}

// scaleService starts a `pushfan serve` at its defaults (with the
// emulator's wire) on db. Only the per-token submit limit (an API abuse
// guard, 30 a minute) is raised: the run submits well over a hundred
// broadcasts.
func (b *bench) scaleService(ctx context.Context, emu *emulator, db benchDB, name string, env ...string) (*service, error) {
	env = append([]string{"PUSHFAN_SUBMIT_PER_MINUTE=100000"}, env...)
	svc, err := startService(ctx, b.o.bin, b.dir, name, emu, serviceSpec{db: db, extraEnv: append(env, b.o.serveEnv...)})
	if err != nil {
		return nil, err
	}
	b.procs = append(b.procs, svc.p)
	return svc, nil
}

// scaleMeasure is one serve and what it measures.
type scaleMeasure struct {
	b   *bench
	svc *service
	emu *emulator
	db  *sql.DB
	sr  *scaleReport

	mu    sync.Mutex
	phase string
}

func (m *scaleMeasure) setPhase(p string) {
	m.mu.Lock()
	m.phase = p
	m.mu.Unlock()
}

// sampleRSS records the serve's resident set every 100 ms under the
// current phase, until the returned func is called.
func (m *scaleMeasure) sampleRSS(ctx context.Context) (stop func()) {
	if m.sr.RSSByPhase == nil {
		m.sr.RSSByPhase = map[string]float64{}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-t.C:
			}
			kb, err := procStatusKB(m.svc.p.pid(), "VmRSS")
			if err != nil {
				continue
			}
			m.mu.Lock()
			if p := m.phase; p != "" {
				m.sr.RSSByPhase[p] = max(m.sr.RSSByPhase[p], float64(kb)/1024)
			}
			m.mu.Unlock()
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

func (m *scaleMeasure) post(ctx context.Context, path string, body any) (broadcastView, time.Duration, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return broadcastView{}, 0, err
	}
	t0 := time.Now()
	v, err := m.svc.call(ctx, http.MethodPost, path, raw)
	return v, time.Since(t0), err
}

func (m *scaleMeasure) get(ctx context.Context, id uint64) (broadcastView, error) {
	return m.svc.call(ctx, http.MethodGet, fmt.Sprintf("/push/broadcasts/%d", id), nil)
}

// cancel cancels id and returns how long until the answer, which must be
// final.
func (m *scaleMeasure) cancel(ctx context.Context, id uint64) (time.Duration, error) {
	t0 := time.Now()
	v, err := m.svc.call(ctx, http.MethodPost, fmt.Sprintf("/push/broadcasts/%d/cancel", id), nil)
	took := time.Since(t0)
	if err != nil {
		return took, err
	}
	if !v.Final() || v.Succeeded+v.Failed+v.Canceled+v.Capped != v.Targeted {
		return took, fmt.Errorf("cancel of %d answered %s with %d+%d+%d of %d", id, v.Status, v.Succeeded, v.Failed, v.Canceled, v.Targeted)
	}
	return took, nil
}

// waitPlanned polls id until its plan is complete and returns how long
// that took from since.
func (m *scaleMeasure) waitPlanned(ctx context.Context, id uint64, since time.Time) (broadcastView, float64, error) {
	for {
		v, err := m.get(ctx, id)
		if err != nil {
			return v, 0, err
		}
		if v.Planned() || v.Final() {
			return v, time.Since(since).Seconds(), nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return v, 0, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
