package retention_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/lease/outcome"
	"pushfan/model"
	"pushfan/retention"
)

// Kept per-target outcomes go PUSHFAN_OUTCOME_RETENTION after their
// broadcast finished, in batches (more rows than one), while the broadcast
// stays until PUSHFAN_RETENTION; a recent broadcast's stay.
func TestRetentionDeletesOldOutcomesAndKeepsTheBroadcast(t *testing.T) {
	tdb := testdb.New(t)
	store := tdb.Store
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	now := time.Now().UTC()
	mk := func(finished time.Time, rows int) uint64 {
		b := &model.Broadcast{
			Submission: model.Submission{Message: model.Message{Title: "x"}, Audience: model.Audience{All: true}},
			Status:     model.StatusCompleted, Counts: model.Counts{Targeted: int64(rows), Succeeded: int64(rows)},
			StartedAt: &finished, FinishedAt: &finished,
		}
		if err := lease.New(tdb.SQL.DB, nil).Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		var q strings.Builder
		args := []any{}
		q.WriteString("INSERT INTO target_outcomes (broadcast_id, seq, epoch, ckpt_seq, part, lo, hi, n, outcomes, created_at) VALUES ")
		for i := range rows {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, 1, 1, ?, 0, ?, ?, 1, ?, ?)")
			args = append(args, b.ID, i+1, i+1, i+1, outcome.Encode(uint64(i+1), []lease.TargetOutcome{{Cursor: uint64(i + 1), Kind: lease.OutcomeSucceeded}}), finished)
		}
		if _, err := tdb.SQL.DB.ExecContext(ctx, q.String(), args...); err != nil {
			t.Fatal(err)
		}
		// A cancel's rest of a chunk goes with the outcomes too.
		if _, err := tdb.SQL.DB.ExecContext(ctx, "INSERT INTO canceled_rests (broadcast_id, seq, lo_id, after_id, hi_id, rest, created_at) VALUES (?, 2, 0, 0, 10, 10, ?)", b.ID, finished); err != nil {
			t.Fatal(err)
		}
		return b.ID
	}
	old, recent := mk(now.Add(-40*24*time.Hour), 2500), mk(now.Add(-24*time.Hour), 3)
	r := retention.New(store, slog.New(slog.NewTextHandler(io.Discard, nil)), retention.Options{
		Keep: 90 * 24 * time.Hour, Pause: time.Millisecond, Outcomes: store, OutcomeKeep: 30 * 24 * time.Hour,
	})
	res, err := r.RunOnce(ctx)
	if err != nil || res.OutcomeBroadcasts != 1 || res.Broadcasts != 0 {
		t.Fatalf("pass: %+v %v, want the outcomes of 1 broadcast and no broadcast deleted", res, err)
	}
	count := func(id uint64) (n int) {
		if err := tdb.SQL.DB.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM target_outcomes WHERE broadcast_id = ?) + (SELECT COUNT(*) FROM canceled_rests WHERE broadcast_id = ?)", id, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n, m := count(old), count(recent); n != 0 || m != 4 {
		t.Fatalf("%d old rows and %d recent rows left, want 0 and 4 (3 outcomes, a rest)", n, m)
	}
	if _, err := store.GetBroadcast(ctx, old); err != nil {
		t.Fatalf("the broadcast went with its outcomes: %v", err)
	}
	if res, err := r.RunOnce(ctx); err != nil || res.OutcomeBroadcasts != 0 {
		t.Fatalf("second pass %+v %v, want nothing left", res, err)
	}
}
