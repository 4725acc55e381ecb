package repository_test

import (
	"math"
	"testing"
	"time"

	"pushfan/model"
	"pushfan/repository"
)

// A broadcast's count of its users counts the tokens its own sends found
// dead (its failures) as live, not those another broadcast's did.
func TestABroadcastsUsersCountItsOwnDeadTokens(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	for u := uint64(1); u <= 4; u++ {
		exec(t, s, "INSERT INTO users (id) VALUES (?)", u)
		insertToken(t, s, u, "t"+string(rune('0'+u)))
	}
	// Tokens 1 and 2 dead since: 1 by broadcast 7's sends, 2 by broadcast 8's.
	exec(t, s, "INSERT INTO broadcast_failures (broadcast_id, token_id, user_id, code) VALUES (7, 1, 1, 'UNREGISTERED'), (8, 2, 2, 'UNREGISTERED')")
	exec(t, s, "UPDATE device_tokens SET invalidated_at = UTC_TIMESTAMP(6) WHERE id IN (1, 2)")
	all := model.Audience{All: true}
	for _, c := range []struct {
		id   uint64
		want int64
	}{{0, 2}, {7, 3}, {8, 3}, {9, 2}} {
		n, err := s.CountBroadcastUsers(ctx(t), nil, all, math.MaxUint64, c.id, 10*time.Second)
		if err != nil || n != c.want {
			t.Fatalf("broadcast %d: %d users (%v), want %d", c.id, n, err, c.want)
		}
	}
	// Under a limit of 1 ms the statement answers, or the server stops it
	// (sqldb's test makes it run past its limit): never a syntax error.
	_, err := s.CountBroadcastUsers(ctx(t), nil, model.Audience{UserIDs: []uint64{3, 4}}, math.MaxUint64, 7, time.Millisecond)
	if err != nil && !repository.IsTimeLimit(err) {
		t.Fatalf("under 1 ms: %v, want the server's time limit or an answer", err)
	}
}

// A count is claimed by one instance at a time: again only once the
// claim is older than late; a count that failed for good is never
// claimed again nor listed by the sweep.
func TestAUsersCountIsClaimedOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	b := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "t"}, Audience: model.Audience{All: true}}}
	if err := leases(s).Create(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	exec(t, s, "UPDATE broadcasts SET planning = 0, planned_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE id = ?", b.ID)
	claim := func() bool {
		t.Helper()
		ok, err := s.ClaimUsersCount(ctx(t), b.ID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	listed := func() int {
		t.Helper()
		list, err := s.UncountedUsers(ctx(t), time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	if listed() != 1 || !claim() || claim() || listed() != 0 {
		t.Fatal("a fresh count: listed, claimed once, then neither claimed nor listed")
	}
	exec(t, s, "UPDATE broadcasts SET users_count_at = users_count_at - INTERVAL 2 MINUTE WHERE id = ?", b.ID)
	if listed() != 1 || !claim() {
		t.Fatal("a claim older than late: listed and claimed again")
	}
	if err := s.FailUsersCount(ctx(t), b.ID, "the count ran past its limit"); err != nil {
		t.Fatal(err)
	}
	exec(t, s, "UPDATE broadcasts SET users_count_at = users_count_at - INTERVAL 2 MINUTE WHERE id = ?", b.ID)
	got, err := s.GetBroadcast(ctx(t), b.ID)
	if err != nil || got.UsersCountError != "the count ran past its limit" || got.UsersTargeted != nil {
		t.Fatalf("after the failure: %+v (%v)", got, err)
	}
	if listed() != 0 || claim() {
		t.Fatal("a count failed for good: never listed nor claimed again")
	}
}
