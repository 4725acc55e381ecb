package fanout

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A resumed run that stops (shutdown) before its producer reaches a Skip
// range must still report that range as done: the checkpoint replaces the
// chunk's stored done ranges with Commit's.
func TestResumableCommitKeepsUnreachedSkipRanges(t *testing.T) {
	ts := makeTargets(1000, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	s := &fakeSender{delay: 20 * time.Millisecond}
	e := testEngine(t, Config{Concurrency: 1, PageSize: 10}, s)
	p := &Progress{}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { waitFor(t, "a send", func() bool { return s.total.Load() >= 1 }); cancel() }()
	skip := []Range{{900, 950}} // stored by the previous holder
	_ = e.Run(ctx, Job{Message: &Message{}, Source: &sliceSource{ts}, After: 0, Skip: skip, Progress: p})
	c := p.Commit(true)
	t.Logf("resumable commit after shutdown: cursor=%d done=%v succeeded=%d", c.Cursor, c.Done, c.Succeeded)
	covered := false
	for _, r := range c.Done {
		if r.Lo <= 900 && r.Hi >= 950 {
			covered = true
		}
	}
	if !covered && c.Cursor < 950 {
		t.Fatalf("skip range [900,950] (outcomes already stored and counted) vanished from the checkpoint: cursor %d, done %v", c.Cursor, c.Done)
	}
}
