package apikey_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/apikey"
	"pushfan/internal/testsupport/testdb"
	"pushfan/model"
)

// clock is a test's time, moved by hand; safe for concurrent reads.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

var admin = model.Actor{Kind: model.ActorToken, ID: "ops", Name: "ops"}

// instance is one pushfan instance's keys over the test's database.
func instance(db *sql.DB, c *clock) *apikey.Keys {
	return apikey.New(db, apikey.Options{Apps: []string{"main", "shop"}, Now: c.now}, nil)
}

func newKeys(t *testing.T) (*apikey.Keys, *testdb.DB, *clock) {
	t.Helper()
	tdb := testdb.New(t)
	c := newClock()
	return instance(tdb.SQL.DB, c), tdb, c
}

func create(t *testing.T, k *apikey.Keys, sp apikey.Spec) apikey.Created {
	t.Helper()
	sp.By = admin
	c, err := k.Create(context.Background(), sp)
	if err != nil {
		t.Fatalf("create %+v: %v", sp, err)
	}
	return c
}

func TestCreateStoresOnlyTheSecretsHash(t *testing.T) {
	k, tdb, clk := newKeys(t)
	c := create(t, k, apikey.Spec{Name: "cron", Role: "sender", Apps: []string{"shop"}, ExpiresIn: "30d"})
	if !strings.HasPrefix(c.Secret, apikey.Prefix) || len(c.Secret) != 47 || !apikey.LooksLikeKey(c.Secret) {
		t.Fatalf("secret %q", c.Secret)
	}
	if !strings.HasPrefix(c.ID, "key_") || len(c.ID) != 20 || c.Role != model.RoleSender || c.CreatedBy != "ops" {
		t.Fatalf("created %+v", c.Key)
	}
	if want := clk.now().Add(30 * 24 * time.Hour); c.ExpiresAt == nil || !c.ExpiresAt.Equal(want) {
		t.Fatalf("expires_at %v, want %v", c.ExpiresAt, want)
	}
	var hash []byte
	var n int
	if err := tdb.SQL.Get(&n, "SELECT COUNT(*) FROM api_keys"); err != nil || n != 1 {
		t.Fatalf("%d rows, %v", n, err)
	}
	if err := tdb.SQL.Get(&hash, "SELECT secret_hash FROM api_keys WHERE id = ?", c.ID); err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256([]byte(c.Secret)); string(hash) != string(want[:]) {
		t.Fatal("secret_hash is not the SHA-256 of the secret")
	}
	var found int
	if err := tdb.SQL.Get(&found, "SELECT COUNT(*) FROM api_keys WHERE CONCAT_WS('|', id, name, role, apps, created_by, created_by_id) LIKE ?", "%"+c.Secret[4:]+"%"); err != nil || found != 0 {
		t.Fatalf("the secret is stored in clear in %d rows (%v)", found, err)
	}
	// Two keys never share a secret or an id.
	d := create(t, k, apikey.Spec{Name: "cron", Role: "sender"})
	if d.Secret == c.Secret || d.ID == c.ID || d.Apps != nil || d.ExpiresAt != nil {
		t.Fatalf("second key %+v", d)
	}
	list, err := k.List(context.Background())
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %d keys, %v", len(list), err)
	}
	for _, x := range list {
		if x.ID == c.ID && (len(x.Apps) != 1 || x.Apps[0] != "shop" || x.LastUsedAt != nil || x.RevokedAt != nil) {
			t.Fatalf("listed %+v", x)
		}
	}
}

func wantField(t *testing.T, err error, field, code string) {
	t.Helper()
	var fe *apikey.FieldError
	if !errors.As(err, &fe) || fe.Field != field || fe.Code != code || fe.Message == "" {
		t.Fatalf("got %v; want a refusal of %s with code %s", err, field, code)
	}
}

func TestCreateRefusesEachBadField(t *testing.T) {
	k, tdb, _ := newKeys(t)
	for _, c := range []struct {
		spec        apikey.Spec
		field, code string
	}{
		{apikey.Spec{Name: "", Role: "admin"}, "name", "invalid_name"},
		{apikey.Spec{Name: "two words", Role: "admin"}, "name", "invalid_name"},
		{apikey.Spec{Name: strings.Repeat("a", 65), Role: "admin"}, "name", "invalid_name"},
		{apikey.Spec{Name: "cron", Role: "root"}, "role", "unknown_role"},
		{apikey.Spec{Name: "cron", Role: ""}, "role", "unknown_role"},
		{apikey.Spec{Name: "cron", Role: "sender", Apps: []string{}}, "apps", "invalid_apps"},
		{apikey.Spec{Name: "cron", Role: "sender", Apps: []string{"shop", "nope"}}, "apps[1]", "unknown_app"},
		{apikey.Spec{Name: "cron", Role: "sender", Apps: []string{"shop", "shop"}}, "apps[1]", "duplicate_app"},
		{apikey.Spec{Name: "cron", Role: "sender", ExpiresIn: "soon"}, "expires_in", "invalid_expires_in"},
		{apikey.Spec{Name: "cron", Role: "sender", ExpiresIn: "-1h"}, "expires_in", "invalid_expires_in"},
		{apikey.Spec{Name: "cron", Role: "sender", ExpiresIn: "0s"}, "expires_in", "invalid_expires_in"},
		{apikey.Spec{Name: "cron", Role: "sender", ExpiresIn: "0d"}, "expires_in", "invalid_expires_in"},
		{apikey.Spec{Name: "cron", Role: "sender", ExpiresIn: "1.5d"}, "expires_in", "invalid_expires_in"},
		{apikey.Spec{Name: "cron", Role: "sender", ExpiresIn: "1000000h"}, "expires_in", "invalid_expires_in"},
	} {
		_, err := k.Create(context.Background(), c.spec)
		wantField(t, err, c.field, c.code)
	}
	var n int
	if err := tdb.SQL.Get(&n, "SELECT COUNT(*) FROM api_keys"); err != nil || n != 0 {
		t.Fatalf("%d rows after refusals only, %v", n, err)
	}
}

func TestCheckAnswersTheKeyOrWhyNot(t *testing.T) {
	k, _, clk := newKeys(t)
	ctx := context.Background()
	c := create(t, k, apikey.Spec{Name: "dash", Role: "viewer", ExpiresIn: "1h"})
	got, err := k.Check(ctx, c.Secret)
	if err != nil || got.ID != c.ID || got.Name != "dash" || got.Role != model.RoleViewer {
		t.Fatalf("check: %+v %v", got, err)
	}
	if a := got.Actor(); a != (model.Actor{Kind: model.ActorKey, ID: c.ID, Name: "dash"}) {
		t.Fatalf("actor %+v", a)
	}
	wrong := apikey.Prefix + strings.Repeat("A", 43)
	if _, err := k.Check(ctx, wrong); !errors.Is(err, apikey.ErrUnknown) {
		t.Fatalf("a wrong key: %v", err)
	}
	if _, err := k.Check(ctx, "not-even-a-key"); !errors.Is(err, apikey.ErrUnknown) {
		t.Fatalf("a token: %v", err)
	}
	clk.add(time.Hour)
	got, err = k.Check(ctx, c.Secret)
	if !errors.Is(err, apikey.ErrExpired) || got.ExpiresAt == nil {
		t.Fatalf("at its expiry: %+v %v", got, err)
	}
}

// A revoke is at once on its own instance; another instance trusts its
// cached lookup for at most the TTL (1 s), then refuses.
func TestRevokeReachesAnotherInstanceWithinTheTTL(t *testing.T) {
	k, tdb, clk := newKeys(t)
	other := instance(tdb.SQL.DB, clk)
	ctx := context.Background()
	c := create(t, k, apikey.Spec{Name: "cron", Role: "sender"})
	for _, inst := range []*apikey.Keys{k, other} {
		if _, err := inst.Check(ctx, c.Secret); err != nil {
			t.Fatal(err)
		}
	}
	clk.add(100 * time.Millisecond)
	if _, err := k.Revoke(ctx, c.ID, admin); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Check(ctx, c.Secret); !errors.Is(err, apikey.ErrRevoked) {
		t.Fatalf("on the revoking instance: %v", err)
	}
	if _, err := other.Check(ctx, c.Secret); err != nil {
		t.Fatalf("the other instance within its TTL (cached): %v", err)
	}
	clk.add(900 * time.Millisecond) // the other's lookup is now 1 s old
	got, err := other.Check(ctx, c.Secret)
	if !errors.Is(err, apikey.ErrRevoked) || got.RevokedAt == nil {
		t.Fatalf("the other instance past its TTL: %+v %v", got, err)
	}
	// Again: no change, no error; an unknown id is ErrNotFound.
	again, err := k.Revoke(ctx, c.ID, admin)
	if err != nil || again.RevokedAt == nil {
		t.Fatalf("revoking twice: %+v %v", again, err)
	}
	if _, err := k.Revoke(ctx, "key_0000000000000000", admin); !errors.Is(err, apikey.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

// Checks within the TTL cost no database read, concurrent ones that miss
// share one: the table's rows read prove it, whatever the request rate.
func TestChecksReadTheTableOncePerTTL(t *testing.T) {
	k, tdb, clk := newKeys(t)
	ctx := context.Background()
	c := create(t, k, apikey.Spec{Name: "cron", Role: "sender"})
	rr := testdb.NewRowsRead(t, tdb.SQL)
	before := rr.Of("api_keys")["api_keys"]
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := k.Check(ctx, c.Secret); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d checks failed", failed.Load())
	}
	// One lookup (one row) and the first use's last_used_at write (an
	// UPDATE by primary key reads its row once).
	if got := rr.Of("api_keys")["api_keys"] - before; got != 2 {
		t.Fatalf("3,200 checks read %d rows of api_keys; want 2 (one lookup, one last-use write)", got)
	}
	clk.add(time.Second)
	for range 100 {
		if _, err := k.Check(ctx, c.Secret); err != nil {
			t.Fatal(err)
		}
	}
	if got := rr.Of("api_keys")["api_keys"] - before; got != 3 {
		t.Fatalf("after the TTL, %d rows read in all; want 3 (one more lookup)", got)
	}
}

func TestLastUsedIsWrittenAtMostOnceAMinute(t *testing.T) {
	k, tdb, clk := newKeys(t)
	ctx := context.Background()
	c := create(t, k, apikey.Spec{Name: "cron", Role: "sender"})
	lastUsed := func() time.Time {
		t.Helper()
		var at sql.NullTime
		if err := tdb.SQL.Get(&at, "SELECT last_used_at FROM api_keys WHERE id = ?", c.ID); err != nil {
			t.Fatal(err)
		}
		return at.Time.UTC()
	}
	t0 := clk.now()
	if _, err := k.Check(ctx, c.Secret); err != nil {
		t.Fatal(err)
	}
	if got := lastUsed(); !got.Equal(t0) {
		t.Fatalf("first use: last_used_at %v, want %v", got, t0)
	}
	for range 59 {
		clk.add(time.Second)
		if _, err := k.Check(ctx, c.Secret); err != nil {
			t.Fatal(err)
		}
	}
	if got := lastUsed(); !got.Equal(t0) {
		t.Fatalf("within the minute: last_used_at %v, want still %v", got, t0)
	}
	clk.add(time.Second)
	if _, err := k.Check(ctx, c.Secret); err != nil {
		t.Fatal(err)
	}
	if got, want := lastUsed(), t0.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("a minute on: last_used_at %v, want %v", got, want)
	}
	list, err := k.List(ctx)
	if err != nil || len(list) != 1 || list[0].LastUsedAt == nil || !list[0].LastUsedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("listed %+v %v", list, err)
	}
}

// OnWrite runs inside the write's transaction: its error leaves nothing.
func TestOnWriteJoinsTheTransaction(t *testing.T) {
	tdb := testdb.New(t)
	var actions []string
	k := apikey.New(tdb.SQL.DB, apikey.Options{OnWrite: func(ctx context.Context, tx *sql.Tx, action string, key apikey.Key, by model.Actor) error {
		actions = append(actions, action+" "+key.Name+" by "+by.Name)
		if key.Name == "refused" {
			return errors.New("audit refused")
		}
		return nil
	}}, nil)
	ctx := context.Background()
	if _, err := k.Create(ctx, apikey.Spec{Name: "refused", Role: "viewer", By: admin}); err == nil {
		t.Fatal("a create whose OnWrite fails succeeded")
	}
	c := create(t, k, apikey.Spec{Name: "kept", Role: "viewer"})
	if _, err := k.Revoke(ctx, c.ID, admin); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tdb.SQL.Get(&n, "SELECT COUNT(*) FROM api_keys"); err != nil || n != 1 {
		t.Fatalf("%d rows, %v; want only the kept key", n, err)
	}
	want := []string{"key.create refused by ops", "key.create kept by ops", "key.revoke kept by ops"}
	if strings.Join(actions, ";") != strings.Join(want, ";") {
		t.Fatalf("OnWrite saw %q; want %q", actions, want)
	}
}
