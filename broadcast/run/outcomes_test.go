package run

import (
	"slices"
	"testing"

	"pushfan/fanout"
	"pushfan/lease"
)

// A checkpoint's outcomes go to the store target by target, in cursor
// order (every stored checkpoint keeps them): the succeeded, the failed
// with their codes, the capped and the canceled.
func TestACheckpointListsItsOutcomesTargetByTarget(t *testing.T) {
	got := toLeaseOutcomes(fanout.Committed{
		SucceededIDs: []uint64{3, 7},
		Failures:     []fanout.Failure{{Target: fanout.Target{Cursor: 5}, Code: "UNREGISTERED"}},
		CappedIDs:    []uint64{9},
		CanceledIDs:  []uint64{4, 11},
	})
	want := []lease.TargetOutcome{
		{Cursor: 3, Kind: lease.OutcomeSucceeded}, {Cursor: 4, Kind: lease.OutcomeCanceled},
		{Cursor: 5, Kind: lease.OutcomeFailed, Code: "UNREGISTERED"}, {Cursor: 7, Kind: lease.OutcomeSucceeded},
		{Cursor: 9, Kind: lease.OutcomeCapped}, {Cursor: 11, Kind: lease.OutcomeCanceled},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	// Succeeded alone (the common case) are listed as read, not sorted again.
	if got := toLeaseOutcomes(fanout.Committed{SucceededIDs: []uint64{1, 2}}); len(got) != 2 || got[1].Cursor != 2 {
		t.Fatalf("outcomes %v", got)
	}
}
