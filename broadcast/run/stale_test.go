package run

import (
	"reflect"
	"testing"

	"pushfan/lease"
)

// The stale tokens a run's pages passed over join its checkpoint's
// outcomes once each (a page read again tells one twice), in cursor
// order, and are taken once: the next checkpoint lists only newer ones.
func TestStaleTokensJoinTheCheckpointOnce(t *testing.T) {
	var k staleKept
	for _, id := range []uint64{9, 4, 9} {
		k.add(id)
	}
	sent := []lease.TargetOutcome{{Cursor: 3, Kind: lease.OutcomeSucceeded}, {Cursor: 5, Kind: lease.OutcomeFailed, Code: "UNREGISTERED"}}
	got := withStale(sent, k.take())
	want := []lease.TargetOutcome{{Cursor: 3, Kind: lease.OutcomeSucceeded}, {Cursor: 4, Kind: lease.OutcomeStale},
		{Cursor: 5, Kind: lease.OutcomeFailed, Code: "UNREGISTERED"}, {Cursor: 9, Kind: lease.OutcomeStale}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	if rest := k.take(); len(rest) != 0 {
		t.Fatalf("taken twice: %v", rest)
	}
}
