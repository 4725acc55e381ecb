package demo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"pushfan/internal/devtools/demo"
	"pushfan/internal/testsupport/testdb"
	"pushfan/model"
)

func TestSeedDemo(t *testing.T) {
	t.Parallel()
	tdb := testdb.New(t)
	s, store, db := demo.New(tdb.SQL, nil), tdb.Store, tdb.SQL
	o := demo.SeedOptions{
		Users: 12345, TokensPerUserMax: 3, DisabledEvery: 10, InvalidatedEvery: 7, DeadEvery: 5, StartUserID: 100,
	}
	users, tokens, err := s.SeedDemo(ctx(t), o)
	if err != nil {
		t.Fatal(err)
	}

	// Expected counts from the documented rules.
	var wantTokens, wantValid, wantDead int64
	var ord uint64
	for i := range o.Users {
		uid := o.StartUserID + uint64(i)
		for range 1 + i%o.TokensPerUserMax {
			ord++
			wantTokens++
			if ord%uint64(o.DeadEvery) == 0 {
				wantDead++
			}
			if ord%uint64(o.InvalidatedEvery) != 0 && uid%uint64(o.DisabledEvery) != 0 {
				wantValid++
			}
		}
	}
	if users != int64(o.Users) || tokens != wantTokens {
		t.Fatalf("seeded %d users, %d tokens; want %d, %d", users, tokens, o.Users, wantTokens)
	}
	n, err := store.CountAudience(ctx(t), model.Audience{All: true})
	if err != nil || n != wantValid {
		t.Fatalf("audience %d (%v), want %d", n, err, wantValid)
	}
	var dead, minUser int64
	if err := db.QueryRowContext(ctx(t),
		"SELECT COUNT(*) FROM device_tokens WHERE token LIKE ?", demo.DeadTokenPrefix+"%").Scan(&dead); err != nil || dead != wantDead {
		t.Fatalf("dead tokens %d (%v), want %d", dead, err, wantDead)
	}
	if err := db.QueryRowContext(ctx(t), "SELECT MIN(id) FROM users").Scan(&minUser); err != nil || minUser != 100 {
		t.Fatalf("first user %d (%v)", minUser, err)
	}
	var tok string
	if err := db.QueryRowContext(ctx(t), "SELECT token FROM device_tokens WHERE user_id = 101 ORDER BY id LIMIT 1 OFFSET 1").Scan(&tok); err != nil ||
		strings.TrimPrefix(tok, demo.DeadTokenPrefix) != "tok-101-2" || tok != demo.SeedTokenName(101, 2, strings.HasPrefix(tok, demo.DeadTokenPrefix)) {
		t.Fatalf("token name %q (%v)", tok, err)
	}

	// Idempotent.
	users, tokens, err = s.SeedDemo(ctx(t), o)
	if err != nil || users != 0 || tokens != 0 {
		t.Fatalf("second seed inserted %d users, %d tokens (%v)", users, tokens, err)
	}
	// Growing the population adds only the new users.
	o.Users += 10
	users, _, err = s.SeedDemo(ctx(t), o)
	if err != nil || users != 10 {
		t.Fatalf("extended seed inserted %d users (%v)", users, err)
	}
}

func TestSeedDemoRejectsNegative(t *testing.T) {
	t.Parallel()
	s := demo.New(testdb.New(t).SQL, nil)
	if _, _, err := s.SeedDemo(ctx(t), demo.SeedOptions{Users: -1}); err == nil {
		t.Fatal("want error")
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}
