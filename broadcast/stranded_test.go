package broadcast_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"pushfan/broadcast"
	"pushfan/broadcast/instance"
	"pushfan/broadcast/plan"
	"pushfan/broadcast/reads"
	"pushfan/broadcast/run"
	"pushfan/fanout"
	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
)

type okSender struct{}

func (okSender) Prepare(*fanout.Message) (fanout.Prepared, error) { return okSender{}, nil }

func (okSender) Send(context.Context, string, fanout.Budget) fanout.Outcome { return fanout.Outcome{} }

// An instance killed (-9) after the last chunk's Done checkpoint committed
// but before Finish committed, or right after submitting a broadcast with
// no chunk: another instance finishes both.
func TestBroadcastsLeftUnfinishedAreFinishedByAnyInstance(t *testing.T) {
	tdb := testdb.New(t)
	store, db := tdb.Store, tdb.SQL.DB
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ls := lease.New(db, log)

	tx, _ := db.BeginTx(ctx, nil)
	res, err := tx.ExecContext(ctx, `INSERT INTO broadcasts (message, audience) VALUES ('{"title":"x","body":"y"}', '{"all":true}')`)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if err := lease.InsertChunks(ctx, tx, uint64(id), lease.Bulk, []lease.Plan{{Lo: 0, Hi: 10, Targets: 0}}); err != nil {
		t.Fatal(err)
	}
	// A second, empty broadcast whose submitter died right after the commit.
	res, err = tx.ExecContext(ctx, `INSERT INTO broadcasts (message, audience) VALUES ('{"title":"x","body":"y"}', '{"user_ids":[424242]}')`)
	if err != nil {
		t.Fatal(err)
	}
	empty, _ := res.LastInsertId()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// The dying instance: claims, sends, stores its Done checkpoint... and is killed.
	c, err := ls.Claim(ctx, lease.ClaimOptions{Owner: "dead", Lease: time.Second})
	if err != nil || c == nil {
		t.Fatal(c, err)
	}
	if _, err := ls.Checkpoint(ctx, c, lease.Checkpoint{Cursor: 10, End: lease.Done}); err != nil {
		t.Fatal(err)
	}

	e, err := fanout.New(fanout.Config{Concurrency: 4, PageSize: 100, SendTimeout: time.Second, MaxAttempts: 1,
		RetryBaseDelay: time.Millisecond, RetryMaxDelay: time.Second}, okSender{}, fanout.NewThrottle(1e6, 0, 0), log)
	if err != nil {
		t.Fatal(err)
	}
	apps := instance.Single(e, store, 0)
	rd := reads.New(store, apps, reads.Options{DBTimeout: 5 * time.Second})
	svc := broadcast.New(store, ls, apps, rd, log, broadcast.Options{DBTimeout: 5 * time.Second, Lease: time.Second, PollInterval: 100 * time.Millisecond, Owner: "survivor",
		Run:  run.Options{FlushInterval: 50 * time.Millisecond, PollInterval: 100 * time.Millisecond, HandBackTimeout: 10 * time.Minute},
		Plan: plan.Options{ChunkWidth: 10000, MaxChunks: 100, PollInterval: 100 * time.Millisecond, PlanParallel: 2, HandBackTimeout: 10 * time.Minute}})
	e.Start(ctx)
	svc.Start(ctx)
	defer func() {
		if err := svc.Stop(ctx); err != nil {
			t.Error(err)
		}
		if err := e.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, bid := range []uint64{uint64(id), uint64(empty)} {
		final, err := rd.Wait(wctx, bid)
		b, _ := rd.Get(ctx, bid)
		chunks, _ := ls.Chunks(ctx, bid)
		t.Logf("broadcast %d: final=%v err=%v status=%s chunks=%+v", bid, final, err, b.Status, chunks)
		if !final {
			t.Errorf("broadcast %d is still %s after 5 s with every chunk done (or none): nothing will ever finish it", bid, b.Status)
		}
	}
}
