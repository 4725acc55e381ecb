package fanout

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// flickerGate refuses every other send a worker asks it for (a run whose
// store gate closes at each slow commit and opens at its confirmation),
// and its Wait returns at once.
type flickerGate struct{ asked atomic.Int64 }

func (g *flickerGate) Open() bool                 { return g.asked.Add(1)%2 == 0 }
func (g *flickerGate) Wait(context.Context) error { return nil }

// A permit taken for a send whose gate turned out closed goes back to the
// throttle: every permit the throttle gives is a send (issue 38). Dropped,
// each was a send its app never made: with a gate closing at every slow
// commit, an app sent at a fraction of its rate.
func TestPermitForAClosedGateGoesBack(t *testing.T) {
	const n = 400
	s := &fakeSender{}
	th := NewThrottle(1e6, 0, 0)
	e := testEngineWith(t, Config{Concurrency: 16, PageSize: 100}, s, th)
	_, before := th.PermitWaits()
	c, err := runJob(context.Background(), t, e, Job{Message: &Message{Title: "t"},
		Source: &sliceSource{makeTargets(n, func(i int) string { return fmt.Sprintf("ok-%d", i) })}, Gate: &flickerGate{}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	_, after := th.PermitWaits()
	if c.Succeeded != n || s.total.Load() != n {
		t.Fatalf("succeeded %d, sends %d, want %d each", c.Succeeded, s.total.Load(), n)
	}
	if spent := after - before; spent != n {
		t.Fatalf("the throttle spent %d permits on %d sends: %d taken for a closed gate were dropped, not given back", spent, n, spent-n)
	}
}
