package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
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
//   - the serve process's peak RSS.
//
// Targets: every submit ≤ 1 s, ≥ 97 % of the rate limit from the first
// second, every cancel ≤ 1 s, RSS ≤ 150 MB.

// scaleReport is the scale run's figures (in the JSON file under "scale").
type scaleReport struct {
	Tokens      int     `json:"tokens"`
	Zones       int     `json:"zones"`
	RateLimit   float64 `json:"rate_limit_per_s"`
	SeedSeconds float64 `json:"seed_seconds,omitempty"`
	// BufferPoolMB is MariaDB's innodb_buffer_pool_size during the run
	// (and RaisedFromMB what it was, when the run raised it).
	BufferPoolMB  float64            `json:"buffer_pool_mb"`
	RaisedFromMB  float64            `json:"buffer_pool_raised_from_mb,omitempty"`
	SubmitMS      map[string]float64 `json:"submit_ms"`
	TargetedKnown map[string]float64 `json:"targeted_known_s"`
	FirstSendMS   float64            `json:"first_send_ms"`
	// PerSecond is the emulator's accepted sends in each of the first 60
	// seconds of the 10M "all".
	PerSecond     []int64            `json:"sends_per_second"`
	First60PerS   float64            `json:"first_60s_per_s"`
	MinSecondPerS int64              `json:"min_second_per_s"`
	CancelMS      map[string]float64 `json:"cancel_ms"`
	Urgent        urgentFigures      `json:"three_user_send"`
	PeakRSSMB     float64            `json:"peak_rss_mb"`
	// RSSByPhase is the serve's highest resident set (sampled every 100
	// ms) while each phase of the run went on.
	RSSByPhase      map[string]float64 `json:"rss_mb_by_phase"`
	PlanRowsPerS    float64            `json:"plan_targets_per_s"`
	ChunkRowsPlaced int64              `json:"chunks_of_the_all"`
	// DB is what the server did per second over the first minute of the
	// "all" (SHOW GLOBAL STATUS deltas: statements and InnoDB rows), for
	// the capacity model; Tables the sizes of pushfan's tables then.
	DB     map[string]float64   `json:"db_per_second_first_minute"`
	Tables map[string]tableSize `json:"tables_during_the_all"`
}

// tableSize is one table's rows and bytes (information_schema estimates).
type tableSize struct {
	Rows       int64 `json:"rows"`
	DataBytes  int64 `json:"data_bytes"`
	IndexBytes int64 `json:"index_bytes"`
}

// dbCounters are the server status counters the capacity model uses.
var dbCounters = []string{"Questions", "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_commit",
	"Handler_read_key", "Handler_read_next", "Handler_read_rnd_next", "Handler_write", "Handler_update", "Handler_delete"}

func globalStatus(ctx context.Context, db *sql.DB) (map[string]float64, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	want := map[string]bool{}
	for _, c := range dbCounters {
		want[c] = true
	}
	out := map[string]float64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if want[k] {
			var f float64
			fmt.Sscan(v, &f)
			out[k] = f
		}
	}
	return out, rows.Err()
}

func tableSizes(ctx context.Context, db *sql.DB) (map[string]tableSize, error) {
	rows, err := db.QueryContext(ctx, `SELECT TABLE_NAME, COALESCE(TABLE_ROWS, 0), COALESCE(DATA_LENGTH, 0), COALESCE(INDEX_LENGTH, 0)
		FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()
		AND TABLE_NAME IN ('broadcasts', 'broadcast_chunks', 'broadcast_failures', 'device_tokens', 'users')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]tableSize{}
	for rows.Next() {
		var name string
		var t tableSize
		if err := rows.Scan(&name, &t.Rows, &t.DataBytes, &t.IndexBytes); err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, rows.Err()
}

// urgentFigures are a 3-user transactional send's submit-to-delivered
// times (median of 20), idle and with 20 × 1M waiting.
type urgentFigures struct {
	IdleMS        float64 `json:"idle_median_ms"`
	WaitingMS     float64 `json:"with_waiting_median_ms"`
	Ratio         float64 `json:"ratio"`
	WaitingChunks int64   `json:"waiting_chunks"`
}

const scaleZoneCount = 16

// scalePhase reports whether the scale run measures phase (SCALE_PHASES,
// a comma-separated subset of kinds, minute, cancels, waiting; all by
// default): a partial run is for looking into one figure.
func (o options) scalePhase(phase string) bool {
	return o.scalePhases == "" || slices.Contains(strings.Split(o.scalePhases, ","), phase)
}

// fitBufferPool sizes MariaDB's buffer pool to hold db's tables with a
// quarter to spare, unless SCALE_BUFFER_POOL=keep, and returns what puts
// the old size back. A deployment of this size needs that (docs/
// CAPACITY.md): MariaDB's default of 128 MB turns every plan step and page
// into disk reads, and the run would measure the disk.
func (b *bench) fitBufferPool(ctx context.Context, db benchDB, sr *scaleReport) (restore func(), err error) {
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var have, tables int64
	if err := conn.QueryRowContext(ctx, "SELECT @@innodb_buffer_pool_size").Scan(&have); err != nil {
		return nil, fmt.Errorf("buffer pool size: %w", err)
	}
	sr.BufferPoolMB = float64(have) / (1 << 20)
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE(SUM(DATA_LENGTH + INDEX_LENGTH), 0) FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = DATABASE()`).Scan(&tables); err != nil {
		return nil, fmt.Errorf("table sizes: %w", err)
	}
	const gb = 1 << 30
	want := (tables*5/4 + gb - 1) / gb * gb
	if !b.o.scalePool || have >= want {
		b.logf("buffer pool %d MB, the tables %d MB", have>>20, tables>>20)
		return func() {}, nil
	}
	if _, err := conn.ExecContext(ctx, "SET GLOBAL innodb_buffer_pool_size = ?", want); err != nil {
		return nil, fmt.Errorf("raise the buffer pool to %d MB: %w", want>>20, err)
	}
	sr.RaisedFromMB, sr.BufferPoolMB = sr.BufferPoolMB, float64(want)/(1<<20)
	b.logf("buffer pool raised from %d MB to %d MB for the run, to hold the tables' %d MB (SCALE_BUFFER_POOL=keep measures %d MB)",
		have>>20, want>>20, tables>>20, have>>20)
	return func() {
		conn, err := sql.Open("mysql", db.dsn)
		if err == nil {
			defer conn.Close()
			_, err = conn.ExecContext(context.Background(), "SET GLOBAL innodb_buffer_pool_size = ?", have)
		}
		if err != nil {
			b.logf("could not put the buffer pool back to %d MB: %v", have>>20, err)
		}
	}, nil
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
	n := b.o.scaleN
	sr := &scaleReport{Tokens: n, Zones: scaleZoneCount, SubmitMS: map[string]float64{}, TargetedKnown: map[string]float64{},
		CancelMS: map[string]float64{}, RateLimit: 9900}
	rep.Scale = sr
	db, seedSecs, err := b.zonedDB(ctx, "scale", n)
	if err != nil {
		return err
	}
	sr.SeedSeconds = seedSecs
	small, _, err := b.zonedDB(ctx, "scale_waiting", 1_000_000)
	if err != nil {
		return err
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
	if !v.Final() || v.Succeeded+v.Failed+v.Canceled != v.Targeted {
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

// allKinds submits one broadcast of every kind, timing each answer, and
// cancels each once its plan is complete (timing the plan of the large
// ones).
func (m *scaleMeasure) allKinds(ctx context.Context) error {
	all := map[string]any{"all": true}
	tomorrow := time.Now().UTC().Add(24*time.Hour).Format("2006-01-02") + "T12:00:00"
	// A finished broadcast with 500,000 failures, for the resend.
	if _, err := m.db.ExecContext(ctx, `INSERT INTO broadcasts (id, status, message, audience, targeted, failed, finished_at, planned_at)
		VALUES (999999999, 'completed', '{"title":"x"}', '{"all":true}', 500000, 500000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`); err != nil {
		return fmt.Errorf("resend fixture: %w", err)
	}
	if _, err := m.db.ExecContext(ctx, `INSERT INTO broadcast_failures (broadcast_id, token_id, user_id, code)
		SELECT 999999999, seq * 2, seq, 'UNAVAILABLE' FROM seq_1_to_500000`); err != nil {
		return fmt.Errorf("resend fixture: %w", err)
	}
	held, _, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "held", "audience": all, "hold": true})
	if err != nil {
		return err
	}
	var uids []uint64
	for u := uint64(1); u <= 10000; u++ {
		uids = append(uids, u*97)
	}
	type kind struct {
		name, path string
		body       any
	}
	kinds := []kind{
		{"all", "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all}},
		{"10k user_ids", "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": map[string]any{"user_ids": uids}}},
		{"named audience", "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": map[string]any{"name": "everyone"}}},
		{"send_at_local", "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all, "send_at_local": tomorrow}},
		{"quiet_hours", "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all, "quiet_hours": map[string]any{"start": "22:00", "end": "08:00"}}},
		{"resend", "/push/broadcasts/999999999/resend?wait=0", map[string]any{}},
		{"release of a held one", fmt.Sprintf("/push/broadcasts/%d/release", held.ID), nil},
	}
	for _, k := range kinds {
		m.setPhase("plan: " + k.name)
		t0 := time.Now()
		v, took, err := m.post(ctx, k.path, k.body)
		if err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
		m.sr.SubmitMS[k.name] = ms(took)
		pv, planned, err := m.waitPlanned(ctx, v.ID, t0)
		if err != nil {
			return err
		}
		m.sr.TargetedKnown[k.name] = planned
		m.b.logf("  %s: answered in %.0f ms (%s), %d targets planned after %.1f s", k.name, ms(took), v.Status, pv.Targeted, planned)
		if k.name == "send_at_local" && planned > 0 {
			m.sr.PlanRowsPerS = float64(pv.Targeted) / planned
		}
		if !pv.Final() {
			if _, err := m.cancel(ctx, v.ID); err != nil {
				return err
			}
		}
	}
	m.setPhase("")
	// The deployment's default quiet hours: its own serve, for the submit.
	qsvc, err := m.b.scaleService(ctx, m.emu, benchDB{dsn: m.svc.dsn()}, "serve-quiet", "PUSHFAN_QUIET_HOURS=22:00-08:00", "PUSHFAN_PLAN_PARALLEL=0")
	if err != nil {
		return err
	}
	defer qsvc.stop()
	qm := &scaleMeasure{b: m.b, svc: qsvc, emu: m.emu, db: m.db, sr: m.sr}
	v, took, err := qm.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all})
	if err != nil {
		return err
	}
	m.sr.SubmitMS["the default quiet hours"] = ms(took)
	m.b.logf("  the default quiet hours: answered in %.0f ms (%s)", ms(took), v.Status)
	_, err = qm.cancel(ctx, v.ID)
	return err
}

// firstMinute sends an "all" for 60 s at the default rate limit: the time
// to the first send, and the sends of each second.
func (m *scaleMeasure) firstMinute(ctx context.Context) error {
	if err := m.emu.reset(ctx); err != nil {
		return err
	}
	m.setPhase("first minute of an all")
	defer m.setPhase("")
	cpu0, _ := procCPU(m.svc.p.pid())
	db0, err := globalStatus(ctx, m.db)
	if err != nil {
		return err
	}
	t0 := time.Now()
	v, took, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": map[string]any{"all": true}})
	if err != nil {
		return err
	}
	m.sr.SubmitMS["all (sent)"] = ms(took)
	var last int64
	next := t0.Add(time.Second)
	for sec := 0; sec < 60; {
		st, err := m.emu.stats(ctx)
		if err != nil {
			return err
		}
		if m.sr.FirstSendMS == 0 && st.Accepted > 0 {
			m.sr.FirstSendMS = ms(time.Since(t0))
		}
		if now := time.Now(); !now.Before(next) {
			m.sr.PerSecond = append(m.sr.PerSecond, st.Accepted-last)
			last = st.Accepted
			next = next.Add(time.Second)
			sec++
			if sec == 10 {
				if pv, err := m.get(ctx, v.ID); err == nil && pv.Planned() {
					m.sr.TargetedKnown["all (sent)"] = pv.PlannedAt.Sub(pv.CreatedAt).Seconds()
				}
			}
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	db1, err := globalStatus(ctx, m.db)
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	m.sr.DB = map[string]float64{}
	for k, v := range db1 {
		m.sr.DB[k] = (v - db0[k]) / secs
	}
	if m.sr.Tables, err = tableSizes(ctx, m.db); err != nil {
		return err
	}
	m.sr.First60PerS = float64(last) / 60
	m.sr.MinSecondPerS = m.sr.PerSecond[0]
	for _, n := range m.sr.PerSecond {
		m.sr.MinSecondPerS = min(m.sr.MinSecondPerS, n)
	}
	if _, ok := m.sr.TargetedKnown["all (sent)"]; !ok {
		m.setPhase("the all, after its first minute, until planned")
		pv, _, err := m.waitPlanned(ctx, v.ID, t0)
		if err != nil {
			return err
		}
		if pv.Planned() {
			m.sr.TargetedKnown["all (sent)"] = pv.PlannedAt.Sub(pv.CreatedAt).Seconds()
		}
	}
	if err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM broadcast_chunks WHERE broadcast_id = ?", v.ID).Scan(&m.sr.ChunkRowsPlaced); err != nil {
		return err
	}
	cpu1, _ := procCPU(m.svc.p.pid())
	m.b.logf("  first minute of an all: first send after %.0f ms, %.0f/s over 60 s (slowest second %d), serve CPU %.1f s",
		m.sr.FirstSendMS, m.sr.First60PerS, m.sr.MinSecondPerS, (cpu1 - cpu0).Seconds())
	took, err = m.cancel(ctx, v.ID)
	m.sr.CancelMS["running"] = ms(took)
	return err
}

// cancels times a cancel in each state a broadcast can be canceled in.
func (m *scaleMeasure) cancels(ctx context.Context) error {
	all := map[string]any{"all": true}
	tomorrow := time.Now().UTC().Add(24*time.Hour).Format("2006-01-02") + "T12:00:00"
	// planning: canceled right after the submit, while its plan runs.
	v, _, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all, "send_at_local": tomorrow})
	if err != nil {
		return err
	}
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	cur, err := m.get(ctx, v.ID)
	if err != nil {
		return err
	}
	state := "planning"
	if cur.Planned() {
		state = "planning (it had finished: waiting zones)"
	}
	took, err := m.cancel(ctx, v.ID)
	if err != nil {
		return err
	}
	m.sr.CancelMS[state] = ms(took)
	// waiting zones: planned, every zone ahead.
	v, _, err = m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all, "send_at_local": tomorrow})
	if err != nil {
		return err
	}
	if _, _, err := m.waitPlanned(ctx, v.ID, time.Now()); err != nil {
		return err
	}
	if took, err = m.cancel(ctx, v.ID); err != nil {
		return err
	}
	m.sr.CancelMS["waiting zones"] = ms(took)
	for _, c := range []struct {
		name string
		body map[string]any
	}{
		{"held", map[string]any{"title": "a", "audience": all, "hold": true}},
		{"scheduled", map[string]any{"title": "a", "audience": all, "send_at": time.Now().Add(time.Hour).Format(time.RFC3339)}},
	} {
		v, _, err := m.post(ctx, "/push/broadcast?wait=0", c.body)
		if err != nil {
			return err
		}
		if took, err = m.cancel(ctx, v.ID); err != nil {
			return err
		}
		m.sr.CancelMS[c.name] = ms(took)
	}
	names := make([]string, 0, len(m.sr.CancelMS))
	for k := range m.sr.CancelMS {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		m.b.logf("  cancel while %s: final after %.0f ms", k, m.sr.CancelMS[k])
	}
	return nil
}

// urgentWithWaiting times 20 three-user sends (submit to all three
// delivered) on an idle table, then again with 20 local-time broadcasts of
// every token waiting.
func (m *scaleMeasure) urgentWithWaiting(ctx context.Context) error {
	idle, err := m.urgentSends(ctx, 20)
	if err != nil {
		return err
	}
	tomorrow := time.Now().UTC().Add(24*time.Hour).Format("2006-01-02") + "T12:00:00"
	var ids []uint64
	for range 20 {
		v, _, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "later", "audience": map[string]any{"all": true}, "send_at_local": tomorrow})
		if err != nil {
			return err
		}
		ids = append(ids, v.ID)
	}
	for _, id := range ids {
		if _, _, err := m.waitPlanned(ctx, id, time.Now()); err != nil {
			return err
		}
	}
	if err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM broadcast_chunks WHERE status = 'waiting'").Scan(&m.sr.Urgent.WaitingChunks); err != nil {
		return err
	}
	busy, err := m.urgentSends(ctx, 20)
	if err != nil {
		return err
	}
	m.sr.Urgent.IdleMS, m.sr.Urgent.WaitingMS = median(idle), median(busy)
	if m.sr.Urgent.IdleMS > 0 {
		m.sr.Urgent.Ratio = m.sr.Urgent.WaitingMS / m.sr.Urgent.IdleMS
	}
	m.b.logf("  a 3-user send: %.1f ms idle, %.1f ms with %d waiting chunks (%.2fx)", m.sr.Urgent.IdleMS, m.sr.Urgent.WaitingMS,
		m.sr.Urgent.WaitingChunks, m.sr.Urgent.Ratio)
	for _, id := range ids {
		if _, err := m.cancel(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// urgentSends times count three-user sends, submit to delivered (the
// emulator accepted all three), one after another.
func (m *scaleMeasure) urgentSends(ctx context.Context, count int) ([]float64, error) {
	var out []float64
	for i := range count {
		st0, err := m.emu.stats(ctx)
		if err != nil {
			return nil, err
		}
		base := uint64(1000 + 3*i)
		t0 := time.Now()
		if _, _, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "code", "audience": map[string]any{"user_ids": []uint64{base, base + 1, base + 2}}}); err != nil {
			return nil, err
		}
		for {
			st, err := m.emu.stats(ctx)
			if err != nil {
				return nil, err
			}
			if st.Accepted-st0.Accepted >= 6 { // two tokens per user
				break
			}
			if time.Since(t0) > 30*time.Second {
				return nil, fmt.Errorf("a 3-user send not delivered after 30 s")
			}
			if err := sleep(ctx, time.Millisecond); err != nil {
				return nil, err
			}
		}
		out = append(out, ms(time.Since(t0)))
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// scaleTargets checks the scale run's figures against its targets.
func (r *report) scaleTargets() {
	s := r.Scale
	worstSubmit, worstCancel := 0.0, 0.0
	for _, v := range s.SubmitMS {
		worstSubmit = max(worstSubmit, v)
	}
	for _, v := range s.CancelMS {
		worstCancel = max(worstCancel, v)
	}
	limit := s.RateLimit
	r.Targets = append(r.Targets,
		target{Name: "every submit", Want: "≤ 1000 ms", Got: fmt.Sprintf("%.0f ms", worstSubmit), Met: worstSubmit <= 1000},
		target{Name: "from the first second", Want: fmt.Sprintf("≥ 97%% of %.0f/s every second", limit), Got: fmt.Sprintf("slowest second %d (%.1f%%)", s.MinSecondPerS, 100*float64(s.MinSecondPerS)/limit),
			Met: float64(s.MinSecondPerS) >= 0.97*limit},
		target{Name: "every cancel", Want: "≤ 1000 ms", Got: fmt.Sprintf("%.0f ms", worstCancel), Met: worstCancel <= 1000},
		target{Name: "a 3-user send with 20 × 1M waiting", Want: "≤ 1.5× idle", Got: fmt.Sprintf("%.2f×", s.Urgent.Ratio), Met: s.Urgent.Ratio <= 1.5},
		target{Name: "peak RSS", Want: "≤ 150 MB", Got: fmt.Sprintf("%.1f MB", s.PeakRSSMB), Met: s.PeakRSSMB <= 150},
	)
}

// printScale prints the scale run's figures.
func (r *report) printScale(w io.Writer) {
	s := r.Scale
	fmt.Fprintf(w, "\nscale: %d tokens in %d zones, one serve at its defaults (PUSHFAN_RATE_LIMIT %.0f)\n\n", s.Tokens, s.Zones, s.RateLimit)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "submit\tanswered ms\ttargeted known s")
	for _, k := range sortedKeys(s.SubmitMS) {
		known := ""
		if v, ok := s.TargetedKnown[k]; ok {
			known = fmt.Sprintf("%.1f", v)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\n", k, s.SubmitMS[k], known)
	}
	tw.Flush()
	if s.RaisedFromMB > 0 {
		fmt.Fprintf(w, "\nMariaDB buffer pool: %.0f MB for the run (the server's own: %.0f MB)\n", s.BufferPoolMB, s.RaisedFromMB)
	} else {
		fmt.Fprintf(w, "\nMariaDB buffer pool: %.0f MB (the server's own)\n", s.BufferPoolMB)
	}
	fmt.Fprintf(w, "plan of a send_at_local: %.0f targets/s; the 10M all: %d chunks\n", s.PlanRowsPerS, s.ChunkRowsPlaced)
	fmt.Fprintf(w, "first send %.0f ms after the submit; %.0f sends/s over the first 60 s (%.1f%% of the limit); slowest second %d\n",
		s.FirstSendMS, s.First60PerS, 100*s.First60PerS/s.RateLimit, s.MinSecondPerS)
	fmt.Fprintf(w, "per second: %s\n", joinInts(s.PerSecond))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\ncancel while\tfinal after ms")
	for _, k := range sortedKeys(s.CancelMS) {
		fmt.Fprintf(tw, "%s\t%.0f\n", k, s.CancelMS[k])
	}
	tw.Flush()
	fmt.Fprintf(w, "\na 3-user send, submit to delivered (median of 20): %.1f ms idle, %.1f ms with %d waiting chunks (%.2fx)\n",
		s.Urgent.IdleMS, s.Urgent.WaitingMS, s.Urgent.WaitingChunks, s.Urgent.Ratio)
	fmt.Fprintf(w, "peak RSS of serve: %.1f MB\n", s.PeakRSSMB)
	for _, k := range sortedKeys(s.RSSByPhase) {
		fmt.Fprintf(w, "  RSS while %s: %.1f MB\n", k, s.RSSByPhase[k])
	}
	if len(s.DB) > 0 {
		fmt.Fprintf(w, "database per second over the first minute of the all:")
		for _, k := range dbCounters {
			fmt.Fprintf(w, " %s %.0f", k, s.DB[k])
		}
		fmt.Fprintln(w)
		for _, k := range []string{"broadcast_chunks", "broadcasts", "device_tokens", "users"} {
			t := s.Tables[k]
			fmt.Fprintf(w, "  %s: %d rows, %.1f MB data, %.1f MB index\n", k, t.Rows, float64(t.DataBytes)/1e6, float64(t.IndexBytes)/1e6)
		}
	}
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func joinInts(xs []int64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, " ")
}
