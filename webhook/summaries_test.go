package webhook_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"pushfan/webhook"
)

// finished is a SummarySource of n broadcasts, all finished in the window.
type finished struct{ n int }

func (f finished) FinishedBetween(context.Context, time.Time, time.Time) ([]uint64, error) {
	ids := make([]uint64, f.n)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	return ids, nil
}

func (finished) Summary(_ context.Context, id uint64, after time.Duration) (any, error) {
	return map[string]any{"broadcast_id": id, "after": webhook.StageName(after)}, nil
}

// More broadcasts in the window than one lookup batch: each stage's
// summary is written once for each, and a second pass (another instance,
// or this one 30 s later) finds them all written and adds nothing.
func TestSummariesAreWrittenOnceAcrossLookupBatches(t *testing.T) {
	e := newEnv(t, "http://127.0.0.1:9/hooks", true)
	s := webhook.NewSummaries(e.db, e.out, finished{n: 1234}, time.Minute, slog.New(slog.DiscardHandler))
	n, err := s.RunOnce(t.Context())
	if err != nil || n != 2*1234 {
		t.Fatalf("first pass wrote %d (%v), want %d (1 h and 24 h of each)", n, err, 2*1234)
	}
	if n, err := webhook.NewSummaries(e.db, e.out, finished{n: 1234}, time.Minute, slog.New(slog.DiscardHandler)).RunOnce(t.Context()); err != nil || n != 0 {
		t.Fatalf("second pass wrote %d (%v), want 0", n, err)
	}
	var rows int
	if err := e.db.QueryRow("SELECT COUNT(DISTINCT msg_id) FROM webhook_outbox WHERE type = 'broadcast.engagement'").Scan(&rows); err != nil || rows != 2*1234 {
		t.Fatalf("outbox holds %d summaries (%v), want %d", rows, err, 2*1234)
	}
}
