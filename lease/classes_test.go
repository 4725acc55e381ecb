package lease_test

import (
	"fmt"
	"testing"
	"time"

	"pushfan/lease"
)

func plans(n int) []lease.Plan {
	out := make([]lease.Plan, n)
	for i := range out {
		out[i] = lease.Plan{Lo: uint64(i * 10), Hi: uint64(i*10 + 10), Targets: 10}
	}
	return out
}

func (f *fixture) claimOnly(owner string, classes ...lease.Class) *lease.Claim {
	f.t.Helper()
	c, err := f.s.Claim(f.ctx(), lease.ClaimOptions{Owner: owner, Lease: time.Minute, Classes: classes})
	if err != nil {
		f.t.Fatalf("claim by %s: %v", owner, err)
	}
	return c
}

// Bulk broadcasts take turns: one submitted while another is under way
// queues from where the queue has reached, so claims alternate between the
// two instead of the first taking every slot to its end.
func TestBulkBroadcastsTakeTurns(t *testing.T) {
	f := newFixture(t)
	a := f.broadcast(plans(6)...)
	for range 2 {
		if c := f.claim("x"); c.BroadcastID != a {
			t.Fatalf("claimed broadcast %d, want %d", c.BroadcastID, a)
		}
	}
	b := f.broadcast(plans(3)...)
	var order []uint64
	for {
		c := f.claim("x")
		if c == nil {
			break
		}
		order = append(order, c.BroadcastID)
	}
	want := fmt.Sprint([]uint64{a, b, a, b, a, b, a})
	if got := fmt.Sprint(order); got != want {
		t.Fatalf("claims went to broadcasts %s, want turns %s", got, want)
	}
}

// Transactional chunks are claimed before bulk ones queued earlier, and a
// claim for some classes only leaves the others alone.
func TestTransactionalChunksGoFirst(t *testing.T) {
	f := newFixture(t)
	bulk := f.broadcast(plans(3)...)
	paced := f.broadcastOf(lease.Paced, plans(1)...)
	urgent := f.broadcastOf(lease.Transactional, plans(1)...)
	if c := f.claimOnly("x", lease.Paced); c == nil || c.BroadcastID != paced || c.Class != lease.Paced {
		t.Fatalf("a paced-only claim got %+v, want broadcast %d's chunk", c, paced)
	}
	if c := f.claimOnly("x", lease.Transactional, lease.Bulk); c == nil || c.BroadcastID != urgent || c.Class != lease.Transactional {
		t.Fatalf("claim got %+v, want the transactional broadcast %d first", c, urgent)
	}
	if c := f.claimOnly("x", lease.Transactional); c != nil {
		t.Fatalf("a transactional-only claim with none left got %+v", c)
	}
	if c := f.claimOnly("x", lease.Transactional, lease.Bulk); c == nil || c.BroadcastID != bulk || c.Class != lease.Bulk {
		t.Fatalf("claim got %+v, want bulk broadcast %d", c, bulk)
	}
}
