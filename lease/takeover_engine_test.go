package lease_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/fanout"
	"pushfan/lease"
)

type revSource struct{ n uint64 }

func (s revSource) Page(_ context.Context, after uint64, limit int, dst []fanout.Target) ([]fanout.Target, error) {
	dst = dst[:0]
	for c := after + 1; c <= s.n && len(dst) < limit; c++ {
		dst = append(dst, fanout.Target{Cursor: c, TokenID: c, Token: fmt.Sprintf("t%d", c)})
	}
	return dst, nil
}

type revSender struct {
	delay time.Duration
	sends atomic.Int64
	// reached is closed at the stopAt-th send (revRun sets both).
	stopAt  int64
	reached chan struct{}
}

func (s *revSender) Prepare(*fanout.Message) (fanout.Prepared, error) { return s, nil }

func (s *revSender) Send(ctx context.Context, _ string, _ fanout.Budget) fanout.Outcome {
	if n := s.sends.Add(1); s.reached != nil && n == s.stopAt {
		close(s.reached)
	}
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
	}
	return fanout.Outcome{}
}

func toEngine(rs []lease.Range) (out []fanout.Range) {
	for _, r := range rs {
		out = append(out, fanout.Range(r))
	}
	return out
}
func toLease(rs []fanout.Range) (out []lease.Range) {
	for _, r := range rs {
		out = append(out, lease.Range(r))
	}
	return out
}

// run runs the engine on claim c like broadcast.chunkRun does, stopping
// after `stopAfter` sends (0: run to the end), and stores the final
// checkpoint (Release when stopped, Done at the end).
func (f *fixture) revRun(c *lease.Claim, sender *revSender, stopAfter int64) {
	f.t.Helper()
	e, err := fanout.New(fanout.Config{Concurrency: 1, PageSize: 10, SendTimeout: time.Second, MaxAttempts: 1,
		RetryBaseDelay: time.Millisecond, RetryMaxDelay: time.Second}, sender, fanout.NewThrottle(1e6, 0, 0), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		f.t.Fatal(err)
	}
	e.Start(context.Background())
	defer func() {
		if err := e.Stop(context.Background()); err != nil {
			f.t.Error(err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if stopAfter > 0 {
		sender.stopAt, sender.reached = stopAfter, make(chan struct{})
		go func() {
			select {
			case <-sender.reached:
			case <-time.After(10 * time.Second):
				f.t.Errorf("timed out after 10s waiting for send %d of the run to stop (%d sent)", stopAfter, sender.sends.Load())
			}
			cancel() // SIGTERM
		}()
	}
	p := &fanout.Progress{}
	p.Reset(c.Cursor, toEngine(c.Done))
	runErr := e.Run(ctx, fanout.Job{Message: &fanout.Message{}, Source: revSource{1000}, After: c.Cursor, Skip: toEngine(c.Done), Progress: p})
	end := lease.Done
	cm := p.Commit(runErr != nil)
	cp := lease.Checkpoint{Cursor: max(cm.Cursor, c.Cursor), Done: toLease(cm.Done), Succeeded: cm.Succeeded, Failed: cm.Failed, Canceled: cm.Canceled, Errors: cm.Errors}
	if runErr != nil {
		end = lease.Release
	} else {
		cp.Cursor, cp.Done = c.Hi, nil
	}
	cp.End = end
	if _, err := f.s.Checkpoint(f.ctx(), c, cp); err != nil {
		f.t.Fatal(err)
	}
}

// A takeover released (SIGTERM) before it reaches a stored done range
// keeps that range in its checkpoint: the next holder neither sends nor
// counts those targets again. (It once dropped them.)
func TestReleasedTakeoverKeepsDoneRangesItDidNotReach(t *testing.T) {
	f := newFixture(t)
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 1000, Targets: 1000})
	// Holder A: targets 900..950 got their outcome (stored, counted) while
	// 1..899 were still in flight or waiting to retry; then A is killed.
	a := f.claim("a")
	if _, err := f.s.Checkpoint(f.ctx(), a, lease.Checkpoint{Cursor: 0, Done: []lease.Range{{Lo: 900, Hi: 950}}, Succeeded: 51, End: lease.KeepLease, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	f.expire(id)
	// B takes over, is SIGTERMed after a few sends, releases.
	b := f.claim("b")
	t.Logf("B resumes at %d skipping %v", b.Cursor, b.Done)
	f.revRun(b, &revSender{delay: 5 * time.Millisecond}, 3)
	// C claims and runs to the end.
	c := f.claim("c")
	t.Logf("C resumes at %d skipping %v", c.Cursor, c.Done)
	s := &revSender{}
	f.revRun(c, s, 0)
	if n := s.sends.Load(); n > 1000-51-3 {
		t.Fatalf("the last holder sent %d, more than the %d targets without a stored outcome", n, 1000-51-3)
	}
	if _, err := f.s.Finish(f.ctx(), id); err != nil {
		t.Fatal(err)
	}
	got := f.counts(id)
	t.Logf("final: %+v", got)
	if got.succeeded+got.failed+got.canceled != 1000 {
		t.Fatalf("1000 targets, but succeeded+failed+canceled = %d (targeted %d)", got.succeeded+got.failed+got.canceled, got.targeted)
	}
}
