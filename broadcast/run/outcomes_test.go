package run

import (
	"slices"
	"testing"

	"pushfan/fanout"
	"pushfan/lease"
)

// A checkpoint's outcomes go to the store target by target: the
// succeeded, the failed with their codes, and the capped.
func TestACheckpointListsItsOutcomesTargetByTarget(t *testing.T) {
	got := toLeaseOutcomes(fanout.Committed{
		SucceededIDs: []uint64{3, 7},
		Failures:     []fanout.Failure{{Target: fanout.Target{Cursor: 5}, Code: "UNREGISTERED"}},
		CappedIDs:    []uint64{9},
	})
	want := []lease.TargetOutcome{
		{Cursor: 3, Kind: lease.OutcomeSucceeded}, {Cursor: 7, Kind: lease.OutcomeSucceeded},
		{Cursor: 5, Kind: lease.OutcomeFailed, Code: "UNREGISTERED"},
		{Cursor: 9, Kind: lease.OutcomeCapped},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
}
