package run

import (
	"fmt"
	"testing"
	"time"

	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

func TestPaceRate(t *testing.T) {
	over := &model.Broadcast{Submission: model.Submission{DeliverOver: 100 * time.Second}}
	for _, tc := range []struct {
		name string
		b    *model.Broadcast
		st   repository.PaceState
		want float64
	}{
		{"max_rate alone is the cap", &model.Broadcast{Submission: model.Submission{MaxRate: 500}}, repository.PaceState{}, 9900},
		{"what is left over the time left", over, repository.PaceState{Targeted: 10000, Attempted: 2000, Elapsed: 20 * time.Second}, 100},
		{"behind: it catches up", over, repository.PaceState{Targeted: 10000, Attempted: 0, Elapsed: 50 * time.Second}, 200},
		{"never over the cap", over, repository.PaceState{Targeted: 10_000_000, Elapsed: 0}, 9900},
		{"overdue: as fast as allowed", over, repository.PaceState{Targeted: 10000, Attempted: 9000, Elapsed: 101 * time.Second}, 9900},
		{"not counted yet", over, repository.PaceState{Targeted: 0}, 0},
	} {
		if got := paceRate(tc.b, tc.st, 9900); got != tc.want {
			t.Errorf("%s: paceRate = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestExpectedFinish(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	started := now.Add(-10 * time.Second)
	running := func(b model.Broadcast) *model.Broadcast {
		b.Status, b.StartedAt = model.StatusRunning, &started
		return &b
	}
	for _, tc := range []struct {
		name string
		b    *model.Broadcast
		want time.Time // zero: nil
	}{
		{"queued", &model.Broadcast{Status: model.StatusQueued, Counts: model.Counts{Targeted: 10}}, time.Time{}},
		{"not counted yet", running(model.Broadcast{}), time.Time{}},
		{"at the rate kept so far", running(model.Broadcast{Counts: model.Counts{Targeted: 30000, Succeeded: 10000}}), now.Add(20 * time.Second)},
		{"max_rate caps the estimate", running(model.Broadcast{Submission: model.Submission{MaxRate: 100}, Counts: model.Counts{Targeted: 30000, Succeeded: 10000}}), now.Add(200 * time.Second)},
		{"deliver_over: its deadline", running(model.Broadcast{Submission: model.Submission{DeliverOver: time.Minute}, Counts: model.Counts{Targeted: 60000, Succeeded: 10000}}), started.Add(time.Minute)},
		{"no guess from a part counted", running(model.Broadcast{Planning: true, Counts: model.Counts{Targeted: 30000, Succeeded: 10000}}), time.Time{}},
		{"deliver_over while counted: its deadline", running(model.Broadcast{Submission: model.Submission{DeliverOver: time.Minute}, Planning: true, Counts: model.Counts{Targeted: 100}}), started.Add(time.Minute)},
		{"deliver_over too short for the budget", running(model.Broadcast{Submission: model.Submission{DeliverOver: 20 * time.Second}, Counts: model.Counts{Targeted: 1_000_000}}), now.Add(time.Duration(1_000_000 * int64(time.Second) / 9900))},
	} {
		got := ExpectedFinish(tc.b, 9900, now)
		switch {
		case tc.want.IsZero() && got != nil:
			t.Errorf("%s: %v, want none", tc.name, got)
		case !tc.want.IsZero() && (got == nil || got.Sub(tc.want).Abs() > time.Millisecond):
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Each class has its own slots: with the bulk slots taken, transactional
// and paced chunks are still claimed; a transactional chunk takes a bulk
// slot first.
func TestLanes(t *testing.T) {
	l := newLanes(2)
	if got := fmt.Sprint(l.free()); got != "[transactional bulk paced]" {
		t.Fatalf("free %s, want every class", got)
	}
	if lane := l.take(lease.Transactional); lane != laneBulk {
		t.Fatalf("a transactional chunk with bulk slots free went to lane %d", lane)
	}
	l.take(lease.Bulk)
	if got := fmt.Sprint(l.free()); got != "[transactional paced]" {
		t.Fatalf("bulk slots full: free %s, want transactional and paced", got)
	}
	u := l.take(lease.Transactional)
	l.take(lease.Transactional)
	l.take(lease.Paced)
	l.take(lease.Paced)
	if got := fmt.Sprint(l.free()); got != "[]" {
		t.Fatalf("all full: free %s", got)
	}
	l.release(u)
	if got := fmt.Sprint(l.free()); got != "[transactional]" {
		t.Fatalf("an urgent slot back: free %s, want transactional", got)
	}
}
