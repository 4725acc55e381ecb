package model

import "testing"

// Targeted is the audience's count only where nothing is still to be
// counted: never while a plan runs (whatever the status: a broadcast
// sends while its plan goes on), before a scheduled broadcast's time, or
// before a held one's count; always once final.
func TestTargetedKnown(t *testing.T) {
	for _, c := range []struct {
		b    Broadcast
		want bool
	}{
		{Broadcast{Status: StatusPlanning, Planning: true}, false},
		{Broadcast{Status: StatusRunning, Planning: true, Counts: Counts{Targeted: 5000, Succeeded: 40}}, false},
		{Broadcast{Status: StatusQueued, Planning: true}, false},
		{Broadcast{Status: StatusScheduled}, false},
		{Broadcast{Status: StatusHeld}, false},
		{Broadcast{Status: StatusHeld, HeldCounted: true}, true},
		{Broadcast{Status: StatusHeld, HeldCounted: true, Counts: Counts{Targeted: 0}}, true}, // an empty audience, counted
		{Broadcast{Status: StatusQueued}, true},
		{Broadcast{Status: StatusRunning, Counts: Counts{Targeted: 7}}, true},
		{Broadcast{Status: StatusCanceled, Planning: true}, true}, // a cancel closed its plan: its counts add up
		{Broadcast{Status: StatusCompleted}, true},
		{Broadcast{Status: StatusFailed}, true},
	} {
		if got := c.b.TargetedKnown(); got != c.want {
			t.Errorf("%s planning=%v held_counted=%v: TargetedKnown %v, want %v", c.b.Status, c.b.Planning, c.b.HeldCounted, got, c.want)
		}
	}
}
