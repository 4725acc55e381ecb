package repository_test

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/model"
)

// A person's session keeps the person and their role and no token; a
// token's keeps its token and no person.
func TestSessionsOfPeopleAndTokens(t *testing.T) {
	st := newStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	person := model.Session{IDHash: sha256.Sum256([]byte("p")), CSRFToken: "c", CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Person: &model.Actor{Kind: model.ActorPerson, ID: "sub-1", Name: "ada@example.com"}, Role: model.RoleApprover}
	token := model.Session{IDHash: sha256.Sum256([]byte("t")), TokenHash: sha256.Sum256([]byte("secret")), CSRFToken: "d", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	for _, s := range []model.Session{person, token} {
		if err := st.CreateSession(ctx(t), s); err != nil {
			t.Fatal(err)
		}
	}
	got, found, err := st.Session(ctx(t), person.IDHash)
	if err != nil || !found || got.Person == nil || *got.Person != *person.Person || got.Role != model.RoleApprover || got.TokenHash != [32]byte{} {
		t.Fatalf("person's session: %+v %v %v", got, found, err)
	}
	got, found, err = st.Session(ctx(t), token.IDHash)
	if err != nil || !found || got.Person != nil || got.Role != "" || got.TokenHash != token.TokenHash {
		t.Fatalf("token's session: %+v %v %v", got, found, err)
	}
}

// A state is taken once, however many callbacks race for it; an expired
// one is not taken.
func TestOIDCStateIsTakenOnce(t *testing.T) {
	st := newStore(t)
	state := model.OIDCState{StateHash: sha256.Sum256([]byte("state")), BrowserHash: sha256.Sum256([]byte("browser")),
		Nonce: "n", Verifier: "v", ExpiresAt: time.Now().Add(time.Minute)}
	if err := st.SaveOIDCState(ctx(t), state); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var taken atomic.Int32
	for range 8 {
		wg.Go(func() {
			got, found, err := st.TakeOIDCState(ctx(t), state.StateHash)
			if err != nil {
				t.Error(err)
				return
			}
			if found {
				taken.Add(1)
				if got.Nonce != "n" || got.Verifier != "v" || got.BrowserHash != state.BrowserHash {
					t.Errorf("taken state %+v", got)
				}
			}
		})
	}
	wg.Wait()
	if n := taken.Load(); n != 1 {
		t.Fatalf("taken %d times, want 1", n)
	}
	old := state
	old.StateHash, old.ExpiresAt = sha256.Sum256([]byte("old")), time.Now().Add(-time.Second)
	if err := st.SaveOIDCState(ctx(t), old); err != nil {
		t.Fatal(err)
	}
	if _, found, err := st.TakeOIDCState(ctx(t), old.StateHash); err != nil || found {
		t.Fatalf("an expired state: found %v, %v", found, err)
	}
}
