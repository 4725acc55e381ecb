package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"pushfan/webhook"
)

// source is a SummarySource of broadcasts finished at given times: those
// in untracked have nothing to send, those in failing fail while they are
// there. It counts the summaries asked for, by broadcast and stage.
type source struct {
	mu        sync.Mutex
	done      []webhook.Finished // in finish order
	untracked map[uint64]bool
	failing   map[uint64]bool
	asked     map[string]int // "id/stage"
}

func newSource() *source {
	return &source{untracked: map[uint64]bool{}, failing: map[uint64]bool{}, asked: map[string]int{}}
}

// finish adds broadcast id, finished at at.
func (s *source) finish(id uint64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = append(s.done, webhook.Finished{At: at, ID: id})
	slices.SortFunc(s.done, func(a, b webhook.Finished) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return int(a.ID) - int(b.ID)
	})
}

func (s *source) FinishedAfter(_ context.Context, cursor webhook.Finished, to time.Time, limit int) ([]webhook.Finished, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []webhook.Finished
	for _, f := range s.done {
		after := f.At.After(cursor.At) || (f.At.Equal(cursor.At) && f.ID > cursor.ID)
		if after && f.At.Before(to) && len(out) < limit {
			out = append(out, f)
		}
	}
	return out, nil
}

func (s *source) Summary(_ context.Context, id uint64, after time.Duration) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked[key(id, after)]++
	switch {
	case s.failing[id]:
		return nil, errors.New("the engagement counts could not be read")
	case s.untracked[id]:
		return nil, nil
	}
	return map[string]any{"broadcast_id": id, "after": webhook.StageName(after)}, nil
}

func (s *source) askedFor(id uint64, after time.Duration) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[key(id, after)]
}

func (s *source) setFailing(id uint64, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing[id] = on
}

func key(id uint64, after time.Duration) string { return fmt.Sprint(id, "/", webhook.StageName(after)) }

// clock is a test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// summaries is an instance's summaries on e's database, on clk's time.
func (e *env) summaries(src webhook.SummarySource, clk *clock) *webhook.Summaries {
	s := webhook.NewSummaries(e.db, e.out, src, time.Minute, slog.New(slog.DiscardHandler))
	s.SetClock(clk.now)
	return s
}

// written is how many broadcast.engagement rows the outbox holds for
// broadcast id.
func (e *env) written(id uint64) int {
	e.t.Helper()
	var n int
	if err := e.db.QueryRow("SELECT COUNT(*) FROM webhook_outbox WHERE type = 'broadcast.engagement' AND broadcast_id = ?", id).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// More broadcasts in each stage's window than one step of a pass: each
// stage's summary is written once for each, and a second pass (another
// instance, or this one 30 s later) asks for none again and adds nothing.
func TestSummariesAreWrittenOnceAcrossLookupBatches(t *testing.T) {
	e := newEnv(t, "http://127.0.0.1:9/hooks", true)
	clk := &clock{t: time.Now().UTC().Truncate(time.Microsecond)}
	src := newSource()
	const n = 1234
	for i := range uint64(n) {
		src.finish(i+1, clk.t.Add(-90*time.Minute))                  // the 1 h stage is due
		src.finish(n+i+1, clk.t.Add(-25*time.Hour).Add(time.Second)) // the 24 h stage is due
	}
	added, err := e.summaries(src, clk).RunOnce(t.Context())
	if err != nil || added != 2*n {
		t.Fatalf("first pass wrote %d (%v), want %d (1 h of %d, 24 h of %d)", added, err, 2*n, n, n)
	}
	clk.add(30 * time.Second)
	if added, err := e.summaries(src, clk).RunOnce(t.Context()); err != nil || added != 0 {
		t.Fatalf("second pass wrote %d (%v), want 0", added, err)
	}
	var rows int
	if err := e.db.QueryRow("SELECT COUNT(DISTINCT msg_id) FROM webhook_outbox WHERE type = 'broadcast.engagement'").Scan(&rows); err != nil || rows != 2*n {
		t.Fatalf("outbox holds %d summaries (%v), want %d", rows, err, 2*n)
	}
	for i := range uint64(2 * n) {
		after := time.Hour
		if i >= n {
			after = 24 * time.Hour
		}
		if got := src.askedFor(i+1, after); got != 1 {
			t.Fatalf("broadcast %d's %s summary was asked for %d times, want once", i+1, webhook.StageName(after), got)
		}
	}
}

// An untracked broadcast (nothing to send) is looked at once per stage,
// not at every pass for the 6 h it stays in each stage's window: two
// instances pass every 30 s for half an hour at the 1 h stage and again
// at the 24 h stage.
func TestAnUntrackedBroadcastIsLookedAtOncePerStage(t *testing.T) {
	e := newEnv(t, "http://127.0.0.1:9/hooks", true)
	clk := &clock{t: time.Now().UTC().Truncate(time.Microsecond)}
	src := newSource()
	for id := uint64(1); id <= 6; id++ {
		src.finish(id, clk.t.Add(-time.Hour-time.Duration(id)*time.Minute))
		src.untracked[id] = id%2 == 1
	}
	a, b := e.summaries(src, clk), e.summaries(src, clk)
	passes := func() {
		for range 30 { // half an hour, each instance every minute
			for _, s := range []*webhook.Summaries{a, b} {
				if _, err := s.RunOnce(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			clk.add(30 * time.Second)
		}
	}
	passes()
	clk.add(23 * time.Hour) // the 24 h stage
	passes()
	for id := uint64(1); id <= 6; id++ {
		for _, after := range webhook.SummaryStages {
			if got := src.askedFor(id, after); got != 1 {
				t.Errorf("broadcast %d (untracked: %v) was looked at %d times at %s, want once", id, src.untracked[id], got, webhook.StageName(after))
			}
		}
		if want := map[bool]int{true: 0, false: 2}[src.untracked[id]]; e.written(id) != want {
			t.Errorf("broadcast %d has %d summaries, want %d", id, e.written(id), want)
		}
	}
}

// A summary that fails is logged, counted and retried later with backoff,
// and the pass goes on to the broadcasts after it. One that keeps failing
// until its stage is more than the grace overdue is dropped.
func TestAFailingSummaryKeepsNoOtherWaiting(t *testing.T) {
	e := newEnv(t, "http://127.0.0.1:9/hooks", true)
	clk := &clock{t: time.Now().UTC().Truncate(time.Microsecond)}
	src := newSource()
	for id := uint64(1); id <= 5; id++ {
		src.finish(id, clk.t.Add(-time.Hour-time.Duration(6-id)*time.Second)) // 1 first
	}
	src.setFailing(2, true)
	src.setFailing(4, true) // for good
	s := e.summaries(src, clk)
	var failed []string
	s.OnFailed = func(stage string) { failed = append(failed, stage) }
	pass := func() {
		t.Helper()
		if _, err := s.RunOnce(t.Context()); err != nil {
			t.Fatalf("a pass failed: %v", err)
		}
	}
	pass()
	for id, want := range map[uint64]int{1: 1, 2: 0, 3: 1, 4: 0, 5: 1} {
		if got := e.written(id); got != want {
			t.Fatalf("after the first pass broadcast %d has %d summaries, want %d (2 and 4 failed; the others go on)", id, got, want)
		}
	}
	if !slices.Equal(failed, []string{"1h", "1h"}) {
		t.Fatalf("failures counted %v, want two at 1h", failed)
	}
	// Not due again for a minute.
	clk.add(30 * time.Second)
	pass()
	if got := src.askedFor(2, time.Hour); got != 1 {
		t.Fatalf("broadcast 2 asked for %d times 30 s after its failure, want 1 (the retry waits a minute)", got)
	}
	src.setFailing(2, false)
	clk.add(31 * time.Second)
	pass()
	if e.written(2) != 1 || src.askedFor(2, time.Hour) != 2 {
		t.Fatalf("broadcast 2: %d summaries after %d asks; want it written at its retry", e.written(2), src.askedFor(2, time.Hour))
	}
	if got := src.askedFor(4, time.Hour); got != 2 || len(failed) != 3 {
		t.Fatalf("broadcast 4 asked for %d times, %d failures counted; want 2 and 3", got, len(failed))
	}
	var retries int
	if err := e.db.QueryRow("SELECT COUNT(*) FROM webhook_summary_retries").Scan(&retries); err != nil || retries != 1 {
		t.Fatalf("%d summaries waiting for a retry (%v), want 1 (broadcast 4)", retries, err)
	}
	// Past the grace, broadcast 4's is dropped, unwritten.
	clk.add(webhook.SummaryGrace)
	pass()
	if err := e.db.QueryRow("SELECT COUNT(*) FROM webhook_summary_retries").Scan(&retries); err != nil || retries != 0 || e.written(4) != 0 {
		t.Fatalf("%d retries left (%v), broadcast 4 has %d summaries; want none past the grace", retries, err, e.written(4))
	}
	for _, id := range []uint64{1, 3, 5} {
		if got := src.askedFor(id, time.Hour); got != 1 {
			t.Errorf("broadcast %d asked for %d times, want once", id, got)
		}
	}
}
