package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql" // the bench reads the event key and token ids
	"github.com/jmoiron/sqlx"

	"pushfan/engagement"
)

// eventsReport is `pushfan-bench events`: what tracking costs the sending
// path (tracked broadcasts against "track": false ones, alternating on one
// serve), and how fast POST /v1/events ingests.
type eventsReport struct {
	Tracked   []*pushfanRun `json:"tracked"`
	Untracked []*pushfanRun `json:"untracked"`
	// Medians, and tracked over untracked.
	TrackedSendsPerS, UntrackedSendsPerS float64
	TrackedCPUMicros, UntrackedCPUMicros float64
	ThroughputRatio, CPURatio            float64
	// Ingestion: Events posted by Clients in posts of Batch.
	Events, Clients, Batch int
	WallSeconds            float64
	EventsPerS             float64
	CPUMicrosPerEvent      float64
	CPUCores               float64 // serve's CPU over the wall time
	PostP50MS, PostP99MS   float64
	Accepted, Duplicates   int64
}

const (
	eventClients = 32
	eventBatch   = 50
)

var trackedBody = []byte(`{"title":"pushfan bench","body":"one message per token, measured","audience":{"all":true}}`)
var untrackedBody = []byte(`{"title":"pushfan bench","body":"one message per token, measured","audience":{"all":true},"track":false}`)

func (b *bench) runEvents(ctx context.Context, rep *report) error {
	o := b.o
	db, err := b.seeded(ctx, o.n)
	if err != nil {
		return err
	}
	emu, err := b.emulator(ctx, 0)
	if err != nil {
		return err
	}
	// Every client here posts from 127.0.0.1; real events come from as
	// many addresses as devices, so the per-address budget is lifted.
	env := append([]string{"PUSHFAN_EVENT_RATE_PER_ADDRESS=1000000"}, o.serveEnv...)
	svc, err := startService(ctx, o.bin, b.dir, "serve-events", emu, serviceSpec{db: db, concurrency: o.c, rateLimit: o.rateLimit, extraEnv: env})
	if err != nil {
		return err
	}
	b.procs = append(b.procs, svc.p)
	defer svc.stop()
	er := &eventsReport{}
	rep.Events = er
	// A first broadcast warms the connections and the caches, unmeasured.
	if _, err := runBroadcast(ctx, svc, emu, broadcastSpec{label: "warm-up", n: db.n, conc: o.c, rateLimit: o.rateLimit, body: untrackedBody}); err != nil {
		return err
	}
	var last *pushfanRun
	for i := range o.repeat {
		for _, tracked := range []bool{i%2 == 0, i%2 != 0} { // alternate which goes first
			label, body := "untracked", untrackedBody
			if tracked {
				label, body = "tracked", trackedBody
			}
			r, err := runBroadcast(ctx, svc, emu, broadcastSpec{label: fmt.Sprintf("%s-run%d", label, i+1), n: db.n, conc: o.c, rateLimit: o.rateLimit, body: body})
			if err != nil {
				return err
			}
			b.logf("  %s: %.0f sends/s, %.1f µs CPU/send", r.Label, r.SendsPerS, r.CPUMicrosPerMsg)
			if tracked {
				er.Tracked, last = append(er.Tracked, r), r
			} else {
				er.Untracked = append(er.Untracked, r)
			}
		}
	}
	sendsPerS := func(r *pushfanRun) float64 { return r.SendsPerS }
	cpu := func(r *pushfanRun) float64 { return r.CPUMicrosPerMsg }
	er.TrackedSendsPerS, er.UntrackedSendsPerS = medianOf(er.Tracked, sendsPerS), medianOf(er.Untracked, sendsPerS)
	er.TrackedCPUMicros, er.UntrackedCPUMicros = medianOf(er.Tracked, cpu), medianOf(er.Untracked, cpu)
	if er.UntrackedSendsPerS > 0 && er.UntrackedCPUMicros > 0 {
		er.ThroughputRatio, er.CPURatio = er.TrackedSendsPerS/er.UntrackedSendsPerS, er.TrackedCPUMicros/er.UntrackedCPUMicros
	}
	return b.ingest(ctx, svc, db, last.BroadcastID, er)
}

// ingest posts a received and an opened event for every target of the
// tracked broadcast id, from eventClients clients at once, each post
// eventBatch events, and measures serve. The tokens are signed with the
// deployment's own key, as the sends signed them (the emulator keeps no
// bodies of a million sends).
func (b *bench) ingest(ctx context.Context, svc *service, db benchDB, id uint64, er *eventsReport) error {
	pool, err := sqlx.Open("mysql", db.dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	var kid string
	var secret []byte
	if err := pool.QueryRowContext(ctx, "SELECT kid, secret FROM event_keys ORDER BY created_at DESC LIMIT 1").Scan(&kid, &secret); err != nil {
		return fmt.Errorf("reading the event key: %w", err)
	}
	keys, err := engagement.NewKeys([]engagement.Key{{ID: kid, Secret: secret}})
	if err != nil {
		return err
	}
	var targets []struct {
		ID   uint64 `db:"id"`
		User uint64 `db:"user_id"`
	}
	if err := pool.SelectContext(ctx, &targets, "SELECT id, user_id FROM device_tokens WHERE invalidated_at IS NULL ORDER BY id"); err != nil {
		return fmt.Errorf("reading the targets: %w", err)
	}
	now := time.Now()
	type ev struct {
		Token string `json:"token"`
		Type  string `json:"type"`
	}
	var posts [][]byte
	var batch []ev
	flush := func() {
		raw, _ := json.Marshal(map[string]any{"events": batch})
		posts, batch = append(posts, raw), batch[:0]
	}
	for _, typ := range []string{"received", "opened"} {
		for _, t := range targets {
			tok := keys.Token(engagement.Claims{BroadcastID: id, Target: t.ID, UserID: t.User, Sent: now, Expires: now.Add(time.Hour)})
			batch = append(batch, ev{tok, typ})
			if len(batch) == eventBatch {
				flush()
			}
		}
	}
	if len(batch) > 0 {
		flush()
	}
	er.Events, er.Clients, er.Batch = 2*len(targets), eventClients, eventBatch
	b.logf("ingesting %d events: %d clients, %d events a post", er.Events, eventClients, eventBatch)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: eventClients}}
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var accepted, dups atomic.Int64
	errs := make(chan error, eventClients)
	cpu0, err := procCPU(svc.p.pid())
	if err != nil {
		return err
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	for range eventClients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if int(i) >= len(posts) || ctx.Err() != nil {
					return
				}
				start := time.Now()
				resp, err := client.Post(svc.base+"/v1/events", "application/json", bytes.NewReader(posts[i]))
				if err != nil {
					errs <- err
					return
				}
				var a struct{ Accepted, Duplicates int64 }
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &a) != nil {
					errs <- fmt.Errorf("POST /v1/events: %d %s", resp.StatusCode, raw)
					return
				}
				accepted.Add(a.Accepted)
				dups.Add(a.Duplicates)
				d := time.Since(start)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	cpu1, err := procCPU(svc.p.pid())
	if err != nil {
		return err
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	er.WallSeconds = wall.Seconds()
	er.EventsPerS = float64(er.Events) / wall.Seconds()
	er.CPUMicrosPerEvent = (cpu1 - cpu0).Seconds() * 1e6 / float64(er.Events)
	er.CPUCores = (cpu1 - cpu0).Seconds() / wall.Seconds()
	er.PostP50MS = float64(lat[len(lat)/2]) / 1e6
	er.PostP99MS = float64(lat[len(lat)*99/100]) / 1e6
	er.Accepted, er.Duplicates = accepted.Load(), dups.Load()
	if er.Accepted != int64(er.Events) {
		return fmt.Errorf("%d events accepted of %d posted (%d duplicates)", er.Accepted, er.Events, er.Duplicates)
	}
	return nil
}

// print writes the events report.
func (er *eventsReport) print(w io.Writer) {
	fmt.Fprintf(w, "tracking's cost on the sending path (medians, alternating runs on one serve):\n")
	fmt.Fprintf(w, "  tracked   %8.0f sends/s  %6.1f µs CPU/send\n", er.TrackedSendsPerS, er.TrackedCPUMicros)
	fmt.Fprintf(w, "  untracked %8.0f sends/s  %6.1f µs CPU/send\n", er.UntrackedSendsPerS, er.UntrackedCPUMicros)
	fmt.Fprintf(w, "  tracked/untracked: throughput %.3f, CPU/send %.3f\n", er.ThroughputRatio, er.CPURatio)
	fmt.Fprintf(w, "events ingested: %d in %.1f s = %.0f events/s, %.1f µs CPU/event, %.2f cores; post p50 %.1f ms, p99 %.1f ms (%d clients, %d a post)\n",
		er.Events, er.WallSeconds, er.EventsPerS, er.CPUMicrosPerEvent, er.CPUCores, er.PostP50MS, er.PostP99MS, er.Clients, er.Batch)
}
