package broadcast

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"pushfan/fanout"
	"pushfan/repository"
)

// flusher moves a running broadcast's counters, failures and dead tokens to
// MySQL every FlushInterval (and when a failure batch fills), as deltas, so
// GET /push/broadcasts/{id} shows live progress.
type flusher struct {
	s    *Service
	id   uint64
	p    *fanout.Progress
	sink *sink
	log  *slog.Logger

	prev          fanout.Snapshot // what the row already holds
	extraCanceled int64           // set before the final flush
	invalidated   int64           // invalidations not yet added to the row
}

func (f *flusher) loop(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(f.s.opt.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-f.sink.full:
		}
		c, cancel := context.WithTimeout(ctx, f.s.opt.DBTimeout)
		if err := f.flush(c); err != nil {
			// Nothing is lost: the delta and the batch stay for next time.
			f.log.WarnContext(ctx, "flushing progress failed, will retry", "err", err)
		}
		cancel()
	}
}

// flush writes failures, invalidations and the counter delta. A failed write
// keeps its data for the next call.
func (f *flusher) flush(ctx context.Context) error {
	failures, dead := f.sink.take()
	if len(failures) > 0 {
		if err := f.s.store.RecordFailures(ctx, failures); err != nil {
			f.sink.putBack(failures, dead)
			return fmt.Errorf("recording failures: %w", err)
		}
	}
	if len(dead) > 0 {
		n, err := f.s.store.InvalidateTokens(ctx, dead, time.Now())
		if err != nil {
			f.sink.putBack(nil, dead)
			return fmt.Errorf("invalidating tokens: %w", err)
		}
		f.invalidated += n
	}
	cur := f.p.Snapshot()
	d := cur.Sub(f.prev)
	delta := repository.Counts{
		Succeeded:   d.Succeeded,
		Failed:      d.Failed,
		Canceled:    d.Canceled + f.extraCanceled,
		Invalidated: f.invalidated,
		Errors:      d.Errors,
	}
	if err := f.s.store.AddProgress(ctx, f.id, delta); err != nil {
		return fmt.Errorf("adding progress: %w", err)
	}
	f.extraCanceled = 0
	f.invalidated = 0
	f.prev = cur
	return nil
}
