package lease_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"pushfan/lease"
	"pushfan/model"
)

// An edit racing the promoter over a due scheduled broadcast: exactly one
// wins each time. Either the edit stored its message and later start and
// the promoter took nothing (it stays scheduled), or the promoter made it
// planning and the edit answered ErrStarted, the old message kept.
func TestEditRacesThePromoterOneWins(t *testing.T) {
	t.Parallel()
	s, leases := heldStores(t)
	const rounds = 20
	var edits, promotions int
	for range rounds {
		due := time.Now().Add(-time.Second).UTC()
		b := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "old"}, Audience: model.Audience{All: true}, SendAt: &due}}
		b.StartsAt = &due
		if err := leases.Submit(ctx(t), b, noPlan); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Hour).UTC()
		var wg sync.WaitGroup
		var promoted []uint64
		var perr, eerr error
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			promoted, perr = leases.PromoteDue(ctx(t))
		})
		wg.Go(func() {
			<-start
			eerr = leases.EditUnstarted(ctx(t), b.ID, model.Message{Title: "new"}, &later, &later)
		})
		close(start)
		wg.Wait()
		if perr != nil {
			t.Fatal(perr)
		}
		got, err := s.GetBroadcast(ctx(t), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case eerr == nil && len(promoted) == 0:
			edits++
			if got.Status != model.StatusScheduled || got.Message.Title != "new" || got.SendAt == nil || !got.SendAt.Equal(later.Truncate(time.Microsecond)) {
				t.Fatalf("the edit won but the row is %s %q send_at %v", got.Status, got.Message.Title, got.SendAt)
			}
		case errors.Is(eerr, lease.ErrStarted) && len(promoted) == 1 && promoted[0] == b.ID:
			promotions++
			if got.Status != model.StatusPlanning || got.Message.Title != "old" {
				t.Fatalf("the promoter won but the row is %s %q", got.Status, got.Message.Title)
			}
		default:
			t.Fatalf("edit %v, promoted %v: not exactly one winner (row %s %q)", eerr, promoted, got.Status, got.Message.Title)
		}
		// A scheduled row left edited is no longer due: the next sweep
		// leaves it.
		if ids, err := leases.PromoteDue(ctx(t)); err != nil || len(ids) != 0 {
			t.Fatalf("a later sweep promoted %v (%v)", ids, err)
		}
	}
	t.Logf("%d rounds: the edit won %d, the promoter %d", rounds, edits, promotions)
	if edits+promotions != rounds {
		t.Fatalf("%d + %d winners in %d rounds", edits, promotions, rounds)
	}
}

// A held broadcast is edited and stays held; once released, it is not
// edited (four eyes: ErrReleased), nor once canceled (ErrStarted).
func TestEditHeldUntilReleased(t *testing.T) {
	t.Parallel()
	s, leases := heldStores(t)
	exp := time.Now().Add(time.Hour).UTC()
	at := time.Now().Add(30 * time.Minute).UTC()
	b := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "old"}, Audience: model.Audience{All: true}, SendAt: &at}, HoldExpiresAt: &exp}
	if err := leases.Submit(ctx(t), b, noPlan); err != nil {
		t.Fatal(err)
	}
	if err := leases.EditUnstarted(ctx(t), b.ID, model.Message{Title: "new"}, &at, &at); err != nil {
		t.Fatalf("edit of a held broadcast: %v", err)
	}
	if got, _ := s.GetBroadcast(ctx(t), b.ID); got.Status != model.StatusHeld || got.Message.Title != "new" {
		t.Fatalf("after the edit: %s %q", got.Status, got.Message.Title)
	}
	if _, err := leases.ReleaseHeld(ctx(t), b.ID, model.Actor{Kind: model.ActorToken, ID: "rev", Name: "rev"}); err != nil {
		t.Fatal(err)
	}
	if err := leases.EditUnstarted(ctx(t), b.ID, model.Message{Title: "sneaky"}, &at, &at); !errors.Is(err, lease.ErrReleased) {
		t.Fatalf("edit after the release: %v, want ErrReleased", err)
	}
	if _, err := leases.Cancel(ctx(t), b.ID, "ops"); err != nil {
		t.Fatal(err)
	}
	if err := leases.EditUnstarted(ctx(t), b.ID, model.Message{Title: "late"}, &at, &at); !errors.Is(err, lease.ErrStarted) {
		t.Fatalf("edit after the cancel: %v, want ErrStarted", err)
	}
	if got, _ := s.GetBroadcast(ctx(t), b.ID); got.Message.Title != "new" {
		t.Fatalf("the refused edits changed the message: %q", got.Message.Title)
	}
	if err := leases.EditUnstarted(ctx(t), 1<<40, model.Message{}, nil, nil); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("edit of an unknown id: %v", err)
	}
}
