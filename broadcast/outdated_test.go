package broadcast_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pushfan/broadcast"
	"pushfan/broadcast/instance"
	"pushfan/broadcast/reads"
	"pushfan/broadcast/run"
	"pushfan/fanout"
	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/metrics"
	"pushfan/model"
	"pushfan/repository"
)

// countingSender accepts every send after a pause, counting sends per token.
type countingSender struct {
	pause time.Duration
	sent  atomic.Int64
	mu    sync.Mutex
	per   map[string]int
}

func (s *countingSender) Prepare(*fanout.Message) (fanout.Prepared, error) { return s, nil }

func (s *countingSender) Send(ctx context.Context, token string, _ fanout.Budget) fanout.Outcome {
	select {
	case <-time.After(s.pause):
	case <-ctx.Done():
		return fanout.Outcome{Class: fanout.Transient, Code: "UNAVAILABLE"}
	}
	s.mu.Lock()
	s.per[token]++
	s.mu.Unlock()
	s.sent.Add(1)
	return fanout.Outcome{}
}

// startService starts a broadcast service named owner whose lease store
// acts as a release built for schema, sending through sender; it returns
// the reads beside it.
func startService(t *testing.T, tdb *testdb.DB, owner string, schema int64, sender fanout.Sender, opt broadcast.Options) (*broadcast.Service, *reads.Reader) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ls := lease.New(tdb.SQL.DB, log)
	ls.SetSchema(schema)
	e, err := fanout.New(fanout.Config{Concurrency: 8, PageSize: 100, SendTimeout: 5 * time.Second, MaxAttempts: 3,
		RetryBaseDelay: time.Millisecond, RetryMaxDelay: time.Second}, sender, fanout.NewThrottle(1e6, 0, 0), log)
	if err != nil {
		t.Fatal(err)
	}
	opt.DBTimeout, opt.Lease, opt.PollInterval, opt.Owner = 5*time.Second, 10*time.Second, 50*time.Millisecond, owner
	opt.Run.FlushInterval, opt.Run.PollInterval, opt.Run.ChunkParallel, opt.Run.HandBackTimeout = 50*time.Millisecond, 50*time.Millisecond, 2, 10*time.Minute
	opt.Plan.ChunkWidth, opt.Plan.MaxChunks, opt.Plan.PollInterval = 1000, 100, 50*time.Millisecond
	opt.Plan.PlanParallel, opt.Plan.HandBackTimeout = 2, 10*time.Minute // config's defaults
	apps := instance.Single(e, tdb.Store, 0)
	rd := reads.New(tdb.Store, apps, reads.Options{DBTimeout: opt.DBTimeout, Stopped: opt.Stopped})
	svc := broadcast.New(tdb.Store, ls, apps, rd, log, opt)
	ctx := context.Background()
	e.Start(ctx)
	svc.Start(ctx)
	t.Cleanup(func() {
		if err := svc.Stop(ctx); err != nil {
			t.Error(err)
		}
		if err := e.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return svc, rd
}

// Releases side by side, in one process: release N sends a broadcast when
// release N+1 raises the schema fence to migrate. N stops taking work, hands
// every chunk back with its outcomes (nothing of it stays leased), and
// answers a submit with ErrShuttingDown; N+1 ends the broadcast, exact.
func TestAnOlderReleaseHandsItsWorkBackWhenANewerOneMigrates(t *testing.T) {
	tdb := testdb.New(t)
	ctx := t.Context()
	const n = 4000
	tdb.SQL.MustExec(fmt.Sprintf("INSERT INTO users (id) SELECT seq FROM seq_1_to_%d", n))
	tdb.SQL.MustExec(fmt.Sprintf("INSERT INTO device_tokens (user_id, token) SELECT seq, CONCAT('t-', seq) FROM seq_1_to_%d ORDER BY seq", n))
	v := repository.SchemaVersion()
	sent := &countingSender{pause: 2 * time.Millisecond, per: map[string]int{}}
	old, _ := startService(t, tdb, "old", v, sent, broadcast.Options{})
	req := broadcast.Request{Submission: model.Submission{App: model.DefaultApp, Message: model.Message{Title: "t", Body: "b"}, Audience: model.Audience{All: true}, Trigger: "api"}}
	b, _, err := old.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for sent.sent.Load() < n/4 {
		if time.Now().After(deadline) {
			t.Fatalf("the older release sent %d of %d in a minute", sent.sent.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The newer release begins to migrate. From then on the older one ends
	// no chunk: the chunks it ended are the ones done now.
	if err := repository.RaiseFence(ctx, tdb.SQL.DB, v+1); err != nil {
		t.Fatal(err)
	}
	var endedBefore int
	if err := tdb.SQL.GetContext(ctx, &endedBefore, "SELECT COUNT(*) FROM broadcast_chunks WHERE broadcast_id = ? AND status = 'done'", b.ID); err != nil {
		t.Fatal(err)
	}
	leases := lease.New(tdb.SQL.DB, nil)
	for {
		rows, err := leases.Chunks(ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		leased := 0
		for _, r := range rows {
			if r.Status == lease.StatusLeased {
				leased++
			}
		}
		if leased == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the older release still holds %d chunks after the fence rose: %+v", leased, rows)
		}
		time.Sleep(10 * time.Millisecond)
	}
	handedBack := sent.sent.Load()
	if handedBack >= n {
		t.Fatalf("the older release sent all %d targets before it noticed the fence", n)
	}
	if _, _, err := old.Submit(ctx, req); !errors.Is(err, broadcast.ErrShuttingDown) {
		t.Fatalf("a submit to the older release after the fence rose: %v, want ErrShuttingDown", err)
	}
	// The newer release goes on.
	_, cur := startService(t, tdb, "new", v+1, sent, broadcast.Options{})
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if final, err := cur.Wait(wctx, b.ID); !final || err != nil {
		t.Fatalf("broadcast not final: %v %v", final, err)
	}
	got, err := cur.Get(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	sent.mu.Lock()
	defer sent.mu.Unlock()
	var dups int
	for _, c := range sent.per {
		dups += c - 1
	}
	if got.Status != model.StatusCompleted || got.Targeted != n || got.Succeeded != int64(len(sent.per)) || len(sent.per) != n {
		t.Fatalf("broadcast %s, %d of %d succeeded; %d tokens sent", got.Status, got.Succeeded, got.Targeted, len(sent.per))
	}
	if dups > 8 {
		t.Fatalf("%d sends repeated; only the 8 in flight may", dups)
	}
	if got.Chunks == nil || got.Chunks.DoneBy["old"] != endedBefore || got.Chunks.DoneBy["new"] != got.Chunks.Chunks-endedBefore {
		t.Fatalf("chunks ended by each release %+v; the older one ended %d before the fence rose and must end none after", got.Chunks, endedBefore)
	}
	t.Logf("the older release had sent %d of %d and ended %d of %d chunks when it handed its chunks back; the newer one ended the broadcast with %d sends repeated",
		handedBack, n, endedBefore, got.Chunks.Chunks, dups)
}

// The self-repair on a running service: a broadcast whose chunks are all
// done while its counter keeps it open is finished within a pass, counted
// in pushfan_broadcasts_repaired_total; one still sending is not touched.
func TestTheRepairFinishesAStrandedBroadcast(t *testing.T) {
	tdb := testdb.New(t)
	ctx := t.Context()
	db := tdb.SQL.DB
	insert := func(status string, open int64, chunks ...string) uint64 {
		res, err := db.ExecContext(ctx, `INSERT INTO broadcasts (message, audience, status, open_chunks, succeeded, planned_at, started_at)
			VALUES ('{"title":"x","body":"y"}', '{"all":true}', ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, status, open, 10*len(chunks))
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		for i, st := range chunks {
			if _, err := db.ExecContext(ctx, `INSERT INTO broadcast_chunks (broadcast_id, seq, lo_id, hi_id, cursor_id, status, committed, targets, done_by)
				VALUES (?, ?, ?, ?, ?, ?, 10, 10, 'x')`, id, i, i*10, i*10+10, i*10+10, st); err != nil {
				t.Fatal(err)
			}
		}
		return uint64(id)
	}
	stranded := insert("running", 1, "done", "done")
	sending := insert("running", 1, "done", "leased")
	reg := prometheus.NewRegistry()
	_, rd := startService(t, tdb, "repairer", repository.SchemaVersion(), &countingSender{per: map[string]int{}},
		broadcast.Options{RepairInterval: 100 * time.Millisecond, Run: run.Options{Metrics: metrics.New(reg, nil)}})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if final, err := rd.Wait(wctx, stranded); !final || err != nil {
		t.Fatalf("the stranded broadcast is not final: %v %v", final, err)
	}
	b, err := rd.Get(ctx, stranded)
	if err != nil || b.Status != model.StatusCompleted || b.Targeted != 20 || b.Succeeded != 20 {
		t.Fatalf("repaired broadcast %+v %v", b, err)
	}
	if b, err := rd.Get(ctx, sending); err != nil || b.Status != model.StatusRunning {
		t.Fatalf("the broadcast still sending is %+v %v", b, err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var repaired float64 = -1
	for _, f := range families {
		if f.GetName() == "pushfan_broadcasts_repaired_total" {
			repaired = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if repaired != 1 {
		t.Fatalf("pushfan_broadcasts_repaired_total %v, want 1", repaired)
	}
}
