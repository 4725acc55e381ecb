package repository_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// noPlan leaves every broadcast to be planned after its submit.
func noPlan(context.Context, *sql.Tx, *model.Broadcast) (*lease.Step, error) { return nil, nil }

// Four instances expiring holds at once cancel each expired hold exactly
// once, leave the unexpired one held, and count its audience canceled.
func TestExpireHoldsOncePerBroadcast(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	past := time.Now().Add(-time.Minute).UTC()
	future := time.Now().Add(time.Hour).UTC()
	var expired []uint64
	for i := 0; i < 30; i++ {
		b := &model.Broadcast{Message: model.Message{Title: "t"}, Audience: model.Audience{All: true}, HoldExpiresAt: &past}
		if err := s.SubmitBroadcast(ctx(t), b, noPlan); err != nil {
			t.Fatal(err)
		}
		if b.Status != model.StatusHeld {
			t.Fatalf("submitted with HoldExpiresAt: status %s", b.Status)
		}
		if err := s.SetHeldTargets(ctx(t), b.ID, int64(i+1)); err != nil {
			t.Fatal(err)
		}
		expired = append(expired, b.ID)
	}
	keep := &model.Broadcast{Message: model.Message{Title: "t"}, Audience: model.Audience{All: true}, HoldExpiresAt: &future}
	if err := s.SubmitBroadcast(ctx(t), keep, noPlan); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[uint64]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				ids, err := s.ExpireHolds(ctx(t))
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
		if b.Status != model.StatusCanceled || b.Error != repository.HoldExpired || b.Canceled != int64(i+1) || b.Targeted != int64(i+1) || b.FinishedAt == nil {
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
	if err := s.SetHeldTargets(ctx(t), expired[0], 999); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.GetBroadcast(ctx(t), expired[0]); b.Targeted != 1 {
		t.Fatalf("a late count overwrote an expired hold's targeted: %d", b.Targeted)
	}
	if _, err := s.ReleaseHeld(ctx(t), expired[0], "x"); !errors.Is(err, repository.ErrNotHeld) {
		t.Fatalf("release of an expired hold: %v", err)
	}
}
