package repository_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"pushfan/model"
	"pushfan/repository"
)

func TestInvalidateTokens(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	exec(t, s, "INSERT INTO users (id) VALUES (1)")
	var ids []uint64
	for i := range 2500 { // more than two chunks of 1000
		ids = append(ids, insertToken(t, s, 1, fmt.Sprintf("inv-%04d", i)))
	}
	first := time.Date(2025, 1, 2, 3, 4, 5, 6789, time.UTC)
	// Already dead before: must keep its original time and reason.
	n, err := s.InvalidateTokens(ctx(t), []repository.Invalidation{{TokenID: ids[0], Reason: "SENDER_ID_MISMATCH"}}, first)
	if err != nil || n != 1 {
		t.Fatalf("first invalidation: %d, %v", n, err)
	}

	var items []repository.Invalidation
	for i, id := range ids[:2100] {
		reason := "UNREGISTERED"
		if i%3 == 0 {
			reason = "INVALID_ARGUMENT"
		}
		items = append(items, repository.Invalidation{TokenID: id, Reason: reason})
	}
	items = append(items, repository.Invalidation{TokenID: ids[5], Reason: "UNREGISTERED"})   // duplicate
	items = append(items, repository.Invalidation{TokenID: 99999999, Reason: "UNREGISTERED"}) // unknown
	n, err = s.InvalidateTokens(ctx(t), items, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n != 2099 { // 2100 listed, one of which was already invalid
		t.Fatalf("invalidated %d, want 2099", n)
	}
	// Idempotent: nothing left to invalidate.
	if n, err := s.InvalidateTokens(ctx(t), items, time.Now()); err != nil || n != 0 {
		t.Fatalf("second pass: %d, %v", n, err)
	}

	var (
		at     time.Time
		reason string
	)
	if err := s.DB().QueryRowContext(ctx(t), "SELECT invalidated_at, invalid_reason FROM device_tokens WHERE id = ?", ids[0]).Scan(&at, &reason); err != nil {
		t.Fatal(err)
	}
	if !at.Equal(first.Truncate(time.Microsecond)) || reason != "SENDER_ID_MISMATCH" {
		t.Fatalf("first invalidation overwritten: %v %q", at, reason)
	}
	if err := s.DB().QueryRowContext(ctx(t), "SELECT invalid_reason FROM device_tokens WHERE id = ?", ids[3]).Scan(&reason); err != nil || reason != "INVALID_ARGUMENT" {
		t.Fatalf("reason of ids[3]: %q, %v", reason, err)
	}

	targets := pageAll(t, s, model.Audience{All: true}, 100)
	if len(targets) != 400 || targets[0].TokenID != ids[2100] {
		t.Fatalf("after invalidation the audience has %d targets starting at %d, want 400 from %d",
			len(targets), targets[0].TokenID, ids[2100])
	}
	if n, err := s.InvalidateTokens(ctx(t), nil, time.Now()); err != nil || n != 0 {
		t.Fatalf("empty: %d, %v", n, err)
	}
}

// A named audience may not return token ids: invalidation by token string.
func TestInvalidateTokensByTokenString(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	exec(t, s, "INSERT INTO users (id) VALUES (1)")
	id := insertToken(t, s, 1, "named-dead")
	insertToken(t, s, 1, "named-alive")
	n, err := s.InvalidateTokens(ctx(t), []repository.Invalidation{
		{Token: "named-dead", Reason: "UNREGISTERED"},
		{Token: "named-dead", Reason: "UNREGISTERED"}, // duplicate: counted once
	}, time.Now())
	if err != nil || n != 1 {
		t.Fatalf("invalidated %d, %v", n, err)
	}
	page, err := s.AudiencePage(ctx(t), model.Audience{All: true}, 0, math.MaxUint64, 10, nil)
	if err != nil || len(page) != 1 || page[0].TokenID == id {
		t.Fatalf("after invalidation the audience is %+v (%v)", page, err)
	}
}
