package retention_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
	"pushfan/retention"
)

// Old finished broadcasts, their failures and error counts, and old
// skipped fires go; recent and unfinished ones stay; /push/stats totals do
// not move; and only one instance runs a pass at a time.
func TestRetentionDeletesOldRowsAndKeepsTotals(t *testing.T) {
	tdb := testdb.New(t)
	store, _ := tdb.Store, tdb.DSN
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	now := time.Now().UTC()
	old, recent := now.Add(-100*24*time.Hour), now.Add(-time.Hour)
	mk := func(finished *time.Time, dry bool, n int64, code string) uint64 {
		b := &model.Broadcast{
			Submission: model.Submission{
				DryRun:   dry,
				Message:  model.Message{Title: "x"},
				Audience: model.Audience{All: true},
			},
			Status:     model.StatusCompleted,
			Counts:     model.Counts{Targeted: n, Succeeded: n - 2, Failed: 2, Errors: map[string]int64{code: 2}},
			StartedAt:  finished,
			FinishedAt: finished,
		}
		if finished == nil {
			b.Status = model.StatusRunning
		}
		if err := lease.New(tdb.SQL.DB, nil).Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		fs := make([]model.Failure, 2500) // more than one delete batch
		for i := range fs {
			fs[i] = model.Failure{BroadcastID: b.ID, TokenID: uint64(i + 1), UserID: 1, Code: code}
		}
		if err := sqldb.InTx(ctx, tdb.SQL.DB, nil, "failures", func(tx *sql.Tx) error {
			_, err := repository.WriteOutcomes(ctx, tx, fs, nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return b.ID
	}
	var gone []uint64
	for range 3 {
		gone = append(gone, mk(&old, false, 100, "UNREGISTERED"))
	}
	gone = append(gone, mk(&old, true, 50, "UNREGISTERED"))
	kept := []uint64{mk(&recent, false, 10, "UNAVAILABLE"), mk(nil, false, 7, "INTERNAL")}
	if err := store.RecordSkippedFires(ctx, "job", []time.Time{old, old.Add(time.Minute), recent}, "test"); err != nil {
		t.Fatal(err)
	}
	before, err := store.Stats(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Another instance's pass holds the lock: this one does nothing.
	release, ok, err := store.TryLock(ctx, "pushfan_retention")
	if err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	r := retention.New(store, slog.New(slog.NewTextHandler(io.Discard, nil)), retention.Options{Keep: 90 * 24 * time.Hour, Pause: time.Millisecond})
	if res, err := r.RunOnce(ctx); err != nil || res.Ran {
		t.Fatalf("a pass ran while another held the lock: %+v %v", res, err)
	}
	release()

	res, err := r.RunOnce(ctx)
	if err != nil || !res.Ran || res.Broadcasts != 4 || res.SkippedFires != 2 {
		t.Fatalf("pass: %+v %v, want 4 broadcasts and 2 skipped fires", res, err)
	}
	after, err := store.Stats(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if after.Broadcasts != before.Broadcasts || after.DryRuns != before.DryRuns || after.Targeted != before.Targeted ||
		after.Succeeded != before.Succeeded || after.Failed != before.Failed || len(after.Errors) != len(before.Errors) {
		t.Fatalf("stats moved: before %+v, after %+v", before, after)
	}
	for code, n := range before.Errors {
		if after.Errors[code] != n {
			t.Fatalf("errors[%s] %d -> %d", code, n, after.Errors[code])
		}
	}
	for _, id := range gone {
		if _, err := store.GetBroadcast(ctx, id); err == nil {
			t.Fatalf("broadcast %d older than the retention is still there", id)
		}
		if fs, _ := store.ListFailures(ctx, id, model.FailureFilter{}, 0, 10); len(fs) != 0 {
			t.Fatalf("broadcast %d's failures are still there", id)
		}
	}
	for _, id := range kept {
		if _, err := store.GetBroadcast(ctx, id); err != nil {
			t.Fatalf("broadcast %d was deleted: %v", id, err)
		}
		if fs, _ := store.ListFailures(ctx, id, model.FailureFilter{}, 0, 10); len(fs) != 10 {
			t.Fatalf("broadcast %d lost failures", id)
		}
	}
	if lf, err := store.LastJobFire(ctx, "job"); err != nil || !lf.FireTime.Equal(recent.Truncate(time.Microsecond)) {
		t.Fatalf("last skipped fire %v %v, want the recent one", lf.FireTime, err)
	}
	if res, err := r.RunOnce(ctx); err != nil || res.Broadcasts != 0 || res.SkippedFires != 0 {
		t.Fatalf("second pass %+v %v, want nothing left", res, err)
	}
}

// Start and Stop are safe twice, and Stop aborts a pass in progress.
func TestRunnerLifecycle(t *testing.T) {
	tdb := testdb.New(t)
	store, _ := tdb.Store, tdb.DSN
	r := retention.New(store, slog.New(slog.DiscardHandler), retention.Options{Keep: time.Hour, Every: time.Hour})
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.Start(t.Context())
	r.Start(t.Context())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("second stop: %v", err)
	}
}
