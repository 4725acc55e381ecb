package fanout

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
)

// A Job's Cap withholds whole users: their targets are never sent, each
// counts capped, and the others' users are listed sent or unsent for the
// checkpoint to settle.
func TestCapWithholdsTargetsAndListsUsers(t *testing.T) {
	const n = 1000
	ts := makeTargets(n, func(i int) string {
		if i%50 == 1 {
			return fmt.Sprintf("dead-%d", i)
		}
		return fmt.Sprintf("ok-%d", i)
	})
	s := &fakeSender{}
	e := testEngine(t, Config{PageSize: 100}, s)
	var pages atomic.Int64
	capUser := func(u uint64) bool { return u%5 == 0 }
	c, err := runJob(context.Background(), t, e, Job{Message: &Message{Title: "t"}, Source: &sliceSource{ts},
		Cap: func(_ context.Context, page []Target) ([]bool, error) {
			pages.Add(1)
			out := make([]bool, len(page))
			for i, t := range page {
				out[i] = capUser(t.UserID)
			}
			return out, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	var capped, dead int64
	for i, tg := range ts {
		sent := s.count(tg.Token)
		switch {
		case capUser(tg.UserID) && sent != 0:
			t.Fatalf("target %d of capped user %d was sent %d times", i, tg.UserID, sent)
		case capUser(tg.UserID):
			capped++
		case sent != 1:
			t.Fatalf("target %d was sent %d times, want 1", i, sent)
		case i%50 == 1:
			dead++
		}
	}
	if c.Capped != capped || c.Succeeded+c.Failed+c.Capped != n || c.Failed != dead || pages.Load() != n/100 {
		t.Fatalf("committed %+v over %d pages; want %d capped, %d failed, every target once, one Cap call per page", c, pages.Load(), capped, dead)
	}
	for _, u := range c.SentUsers {
		if capUser(u) {
			t.Fatalf("capped user %d listed sent", u)
		}
	}
	for _, u := range c.UnsentUsers {
		if capUser(u) || !slices.Contains(c.SentUsers, u) && u%25 != 1 {
			t.Fatalf("user %d listed unsent: it is capped, or has no dead token", u)
		}
	}
}

// A run stopped mid-page keeps its capped targets capped: they are
// outcomes already, never counted canceled.
func TestCanceledRunKeepsCappedOutcomes(t *testing.T) {
	ts := makeTargets(200, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	s := &fakeSender{}
	e := testEngine(t, Config{PageSize: 200, Concurrency: 1}, s)
	ctx, cancel := context.WithCancel(context.Background())
	var sent atomic.Int64
	// The engine's gate stops the run after 10 targets are handed over.
	gate := gateFunc(func(context.Context) error {
		if sent.Add(1) > 10 {
			cancel()
			return context.Canceled
		}
		return nil
	})
	c, _ := runJob(ctx, t, e, Job{Message: &Message{Title: "t"}, Source: &sliceSource{ts}, Gate: gate,
		Cap: func(_ context.Context, page []Target) ([]bool, error) {
			out := make([]bool, len(page))
			for i := range page {
				out[i] = i%2 == 1
			}
			return out, nil
		}})
	if c.Capped != 100 || c.Succeeded+c.Failed+c.Canceled+c.Capped != 200 || c.Canceled == 0 {
		t.Fatalf("committed %+v; want the 100 capped kept, the rest sent or canceled", c)
	}
}

type gateFunc func(context.Context) error

func (g gateFunc) Wait(ctx context.Context) error { return g(ctx) }
func (gateFunc) Open() bool                       { return true }

// A page whose Cap is cut short by the run's stop is counted canceled,
// with its users listed unsent, so that the checkpoint gives back what
// the cut-short reservation may have taken.
func TestCapCutShortByAStopCancelsItsPage(t *testing.T) {
	ts := makeTargets(300, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	e := testEngine(t, Config{PageSize: 100}, &fakeSender{})
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	c, _ := runJob(ctx, t, e, Job{Message: &Message{Title: "t"}, Source: &sliceSource{ts},
		Cap: func(ctx context.Context, page []Target) ([]bool, error) {
			if calls.Add(1) == 2 {
				cancel()
				return nil, ctx.Err()
			}
			return make([]bool, len(page)), nil
		}})
	// The first page's targets were sent or canceled by the stop; the
	// second's all canceled; the third never read.
	if c.Succeeded+c.Canceled != 200 || c.Canceled < 100 || c.Cursor != 200 {
		t.Fatalf("committed %+v; want the first two pages' 200 targets with an outcome, the second's 100 canceled", c)
	}
	unsent := sortedUsers(c.UnsentUsers)
	for u := uint64(51); u <= 100; u++ {
		if !slices.Contains(unsent, u) {
			t.Fatalf("user %d of the cut-short page is not listed unsent: %v", u, unsent)
		}
	}
}

func sortedUsers(ids []uint64) []uint64 {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return slices.Compact(ids)
}
