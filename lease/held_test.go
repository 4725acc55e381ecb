package lease_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// heldStores gives the test its own migrated database: the reads, and the
// state owner.
func heldStores(t *testing.T) (*repository.Store, *lease.Store) {
	t.Helper()
	tdb := testdb.New(t)
	return tdb.Store, lease.New(tdb.SQL.DB, nil)
}

// ctx returns a context that ends with the test (and after a minute at most),
// so a hung query fails the test instead of the whole run.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// noPlan leaves every broadcast to be planned after its submit.
func noPlan(context.Context, *sql.Tx, *model.Broadcast) (*lease.Step, error) { return nil, nil }

// Four instances expiring holds at once cancel each expired hold exactly
// once, leave the unexpired one held, and count its audience canceled.
func TestExpireHoldsOncePerBroadcast(t *testing.T) {
	t.Parallel()
	s, leases := heldStores(t)
	past := time.Now().Add(-time.Minute).UTC()
	future := time.Now().Add(time.Hour).UTC()
	var expired []uint64
	for i := 0; i < 30; i++ {
		b := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "t"}, Audience: model.Audience{All: true}}, HoldExpiresAt: &past}
		if err := leases.Submit(ctx(t), b, noPlan); err != nil {
			t.Fatal(err)
		}
		if b.Status != model.StatusHeld {
			t.Fatalf("submitted with HoldExpiresAt: status %s", b.Status)
		}
		if err := leases.SetHeldTargets(ctx(t), b.ID, int64(i+1)); err != nil {
			t.Fatal(err)
		}
		expired = append(expired, b.ID)
	}
	keep := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "t"}, Audience: model.Audience{All: true}}, HoldExpiresAt: &future}
	if err := leases.Submit(ctx(t), keep, noPlan); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[uint64]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				ids, err := leases.ExpireHolds(ctx(t))
				if err != nil {
					t.Error(err)
					return
				}
				if len(ids) == 0 {
					return
				}
				mu.Lock()
				for _, id := range ids {
					seen[id]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i, id := range expired {
		if seen[id] != 1 {
			t.Fatalf("broadcast %d expired %d times", id, seen[id])
		}
		b, err := s.GetBroadcast(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if b.Status != model.StatusCanceled || b.Error != lease.HoldExpired || b.Canceled != int64(i+1) || b.Targeted != int64(i+1) || b.FinishedAt == nil {
			t.Fatalf("expired hold %+v", b)
		}
	}
	if len(seen) != len(expired) {
		t.Fatalf("%d broadcasts expired, want %d", len(seen), len(expired))
	}
	b, err := s.GetBroadcast(ctx(t), keep.ID)
	if err != nil || b.Status != model.StatusHeld {
		t.Fatalf("unexpired hold: %+v, %v", b, err)
	}
	// A count landing after the hold ended changes nothing.
	if err := leases.SetHeldTargets(ctx(t), expired[0], 999); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.GetBroadcast(ctx(t), expired[0]); b.Targeted != 1 {
		t.Fatalf("a late count overwrote an expired hold's targeted: %d", b.Targeted)
	}
	if _, err := leases.ReleaseHeld(ctx(t), expired[0], model.Actor{Kind: model.ActorToken, ID: "x", Name: "x"}); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("release of an expired hold: %v", err)
	}
}

// A held broadcast's targeted is known once its preview count is stored,
// an empty audience's 0 included, and unknown again once released: its
// plan counts the audience anew (model.Broadcast.TargetedKnown on the
// stored row).
func TestAHeldCountIsKnownUntilTheRelease(t *testing.T) {
	t.Parallel()
	s, leases := heldStores(t)
	future := time.Now().Add(time.Hour).UTC()
	b := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "t"}, Audience: model.Audience{All: true}}, HoldExpiresAt: &future}
	if err := leases.Submit(ctx(t), b, noPlan); err != nil {
		t.Fatal(err)
	}
	known := func(what string, want bool) {
		t.Helper()
		got, err := s.GetBroadcast(ctx(t), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.TargetedKnown() != want {
			t.Fatalf("%s: %s, planning %v, held counted %v, targeted %d: known %v, want %v",
				what, got.Status, got.Planning, got.HeldCounted, got.Targeted, got.TargetedKnown(), want)
		}
	}
	known("held, before its count", false)
	if err := leases.SetHeldTargets(ctx(t), b.ID, 0); err != nil {
		t.Fatal(err)
	}
	known("held, counted empty", true)
	if _, err := leases.ReleaseHeld(ctx(t), b.ID, model.Actor{Kind: model.ActorToken, ID: "bob", Name: "bob"}); err != nil {
		t.Fatal(err)
	}
	known("released (planning)", false)
}
