package lease_test

import (
	"testing"
	"time"

	"pushfan/lease"
)

// An instance claims each app's chunks in slots of its own: a claim for
// one app never takes another app's chunk, pending or expired.
func TestClaimTakesTheNamedAppsChunksOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	partner := f.broadcast(plans(2)...)
	consumer := f.broadcast(plans(1)...)
	if _, err := f.db.ExecContext(f.ctx(), "UPDATE broadcast_chunks SET app = 'partner' WHERE broadcast_id = ?", partner); err != nil {
		t.Fatal(err)
	}
	claim := func(app string) *lease.Claim {
		t.Helper()
		c, err := f.s.Claim(f.ctx(), lease.ClaimOptions{Owner: "a", Lease: time.Minute, App: app})
		if err != nil {
			t.Fatalf("claim for %s: %v", app, err)
		}
		return c
	}
	if c := claim("default"); c == nil || c.BroadcastID != consumer {
		t.Fatalf("claim for default = %+v, want broadcast %d's chunk", c, consumer)
	}
	if c := claim("default"); c != nil {
		t.Fatalf("a second claim for default took %+v, a partner chunk", c.Key)
	}
	first := claim("partner")
	if first == nil || first.BroadcastID != partner {
		t.Fatalf("claim for partner = %+v, want broadcast %d's chunk", first, partner)
	}
	// The partner chunk's lease expires: only a partner claim takes it over.
	f.expire(partner)
	if c := claim("default"); c != nil {
		t.Fatalf("a default claim took over %+v, a partner chunk", c.Key)
	}
	if c := claim("partner"); c == nil || c.BroadcastID != partner {
		t.Fatalf("partner claim = %+v, want a chunk of broadcast %d", c, partner)
	}
}
