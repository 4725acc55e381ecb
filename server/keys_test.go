package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"pushfan/broadcast"
	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
	"pushfan/model"
)

// keyAnswer is one exchange's status and, for an error, its body.
type keyAnswer struct {
	status int
	err    teststack.ErrorBody
	raw    []byte
}

// callAt sends a request to the instance at base with bearer token (""
// for none) and decodes a 2xx answer into out.
func callAt(t *testing.T, s *teststack.Stack, base, method, path, token string, body any, out any) keyAnswer {
	t.Helper()
	var r *bytes.Reader
	switch b := body.(type) {
	case nil:
		r = bytes.NewReader(nil)
	case string:
		r = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	a := keyAnswer{status: resp.StatusCode, raw: readAll(t, resp)}
	switch {
	case resp.StatusCode >= 400:
		decode(t, a.raw, &a.err)
	case out != nil && len(a.raw) > 0:
		decode(t, a.raw, out)
	}
	return a
}

// apiKey is a key as POST /push/keys and GET /push/keys answer it.
type apiKey struct {
	ID         string     `json:"id"`
	Key        string     `json:"key"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	Apps       []string   `json:"apps"`
	CreatedBy  string     `json:"created_by"`
	ExpiresAt  *time.Time `json:"expires_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

func createKey(t *testing.T, s *teststack.Stack, body map[string]any) apiKey {
	t.Helper()
	var k apiKey
	if a := callAt(t, s, s.API.URL, "POST", "/push/keys", teststack.AdminToken, body, &k); a.status != http.StatusCreated || !strings.HasPrefix(k.Key, "pfk_") || k.ID == "" {
		t.Fatalf("create key %v: %d %s", body, a.status, a.raw)
	}
	return k
}

func listKeys(t *testing.T, s *teststack.Stack) ([]apiKey, string) {
	t.Helper()
	var l struct {
		Keys []apiKey `json:"keys"`
	}
	a := callAt(t, s, s.API.URL, "GET", "/push/keys", teststack.AdminToken, nil, &l)
	if a.status != http.StatusOK {
		t.Fatalf("list keys: %d %s", a.status, a.raw)
	}
	return l.Keys, string(a.raw)
}

// A key is created (shown once), works as a bearer token with its role,
// is listed without its secret and with its last use, and once revoked is
// refused by the instance that revoked it at once and by a second
// instance on the same database within 2 s.
func TestKeysCreateUseListRevokeOnTwoInstances(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	second := s.AddInstance()
	k := createKey(t, s, map[string]any{"name": "cron", "role": "sender"})
	if k.Name != "cron" || k.Role != "sender" || k.Apps != nil || k.ExpiresAt != nil || k.RevokedAt != nil || k.LastUsedAt != nil || k.CreatedBy != "admin-1" {
		t.Fatalf("created %+v", k)
	}
	// Before any use: listed, never used, no secret.
	keys, raw := listKeys(t, s)
	if len(keys) != 1 || keys[0].ID != k.ID || keys[0].LastUsedAt != nil || keys[0].Key != "" || strings.Contains(raw, k.Key) {
		t.Fatalf("listed before use: %s", raw)
	}
	// It works on both instances, with its role: a sender may send, may
	// not manage keys.
	for _, base := range []string{s.API.URL, second.API.URL} {
		if a := callAt(t, s, base, "GET", "/push/stats", k.Key, nil, nil); a.status != http.StatusOK {
			t.Fatalf("GET /push/stats with the key at %s: %d %s", base, a.status, a.raw)
		}
	}
	var b teststack.Broadcast
	if a := callAt(t, s, s.API.URL, "POST", "/push/broadcast", k.Key, map[string]any{"title": "t", "body": "b", "audience": map[string]any{"user_ids": []int{1}}}, &b); a.status != http.StatusOK && a.status != http.StatusAccepted {
		t.Fatalf("a sender key's broadcast: %d %s", a.status, a.raw)
	}
	if b.CreatedBy != "cron" {
		t.Fatalf("created_by %q, want the key's name", b.CreatedBy)
	}
	if a := callAt(t, s, s.API.URL, "GET", "/push/keys", k.Key, nil, nil); a.status != http.StatusForbidden || a.err.Error.Code != "forbidden" || !strings.Contains(a.err.Error.Message, "needs admin") {
		t.Fatalf("a sender key listing keys: %d %s", a.status, a.raw)
	}
	keys, _ = listKeys(t, s)
	if len(keys) != 1 || keys[0].LastUsedAt == nil || time.Since(*keys[0].LastUsedAt) > time.Minute {
		t.Fatalf("listed after use: %+v", keys)
	}
	// Revoke, with the second instance's lookup cached a moment ago.
	if a := callAt(t, s, second.API.URL, "GET", "/push/stats", k.Key, nil, nil); a.status != http.StatusOK {
		t.Fatalf("second instance before the revoke: %d", a.status)
	}
	if a := callAt(t, s, s.API.URL, "DELETE", "/push/keys/"+k.ID, teststack.AdminToken, nil, nil); a.status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", a.status, a.raw)
	}
	revoked := time.Now()
	if a := callAt(t, s, s.API.URL, "GET", "/push/stats", k.Key, nil, nil); a.status != http.StatusUnauthorized || !strings.Contains(a.err.Error.Message, "was revoked") {
		t.Fatalf("the revoking instance right after: %d %s", a.status, a.raw)
	}
	var took time.Duration
	waitUntil(t, "the second instance refuses the revoked key", 2*time.Second, func() bool {
		a := callAt(t, s, second.API.URL, "GET", "/push/stats", k.Key, nil, nil)
		if a.status == http.StatusUnauthorized {
			took = time.Since(revoked)
			if !strings.Contains(a.err.Error.Message, "was revoked") {
				t.Fatalf("second instance's 401: %s", a.raw)
			}
			return true
		}
		if a.status != http.StatusOK {
			t.Fatalf("second instance: %d %s", a.status, a.raw)
		}
		return false
	})
	t.Logf("the second instance refused the revoked key %v after the revoke", took.Round(time.Millisecond))
	keys, _ = listKeys(t, s)
	if len(keys) != 1 || keys[0].RevokedAt == nil {
		t.Fatalf("listed after the revoke: %+v", keys)
	}
	// Revoking again is no error; an unknown id is a 404.
	if a := callAt(t, s, s.API.URL, "DELETE", "/push/keys/"+k.ID, teststack.AdminToken, nil, nil); a.status != http.StatusNoContent {
		t.Fatalf("revoke again: %d %s", a.status, a.raw)
	}
	if a := callAt(t, s, s.API.URL, "DELETE", "/push/keys/key_0000000000000000", teststack.AdminToken, nil, nil); a.status != http.StatusNotFound || a.err.Error.Code != "key_not_found" {
		t.Fatalf("revoke unknown: %d %s", a.status, a.raw)
	}
}

func TestKeyCreateRefusesEachBadFieldNamingIt(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	for _, c := range []struct {
		body        string
		field, code string
	}{
		{`{"name":"two words","role":"sender"}`, "name", "invalid_name"},
		{`{"role":"sender"}`, "name", "invalid_name"},
		{`{"name":"cron","role":"root"}`, "role", "unknown_role"},
		{`{"name":"cron"}`, "role", "unknown_role"},
		{`{"name":"cron","role":"sender","apps":["nope"]}`, "apps[0]", "unknown_app"},
		{`{"name":"cron","role":"sender","apps":[]}`, "apps", "invalid_apps"},
		{`{"name":"cron","role":"sender","expires_in":"-5m"}`, "expires_in", "invalid_expires_in"},
		{`{"name":"cron","role":"sender","expires_in":"0s"}`, "expires_in", "invalid_expires_in"},
		{`{"name":"cron","role":"sender","expires_in":"tomorrow"}`, "expires_in", "invalid_expires_in"},
		{`{"name":"cron","role":"sender","expires_in":3600}`, "expires_in", "invalid_type"},
		{`{"name":"cron","role":"sender","secret":"mine"}`, "secret", "unknown_field"},
	} {
		a := callAt(t, s, s.API.URL, "POST", "/push/keys", teststack.AdminToken, c.body, nil)
		if a.status != http.StatusBadRequest || a.err.Error.Field != c.field || a.err.Error.Code != c.code || a.err.Error.Message == "" {
			t.Errorf("%s: %d %s; want 400 %s on %s", c.body, a.status, a.raw, c.code, c.field)
		}
	}
	if keys, raw := listKeys(t, s); len(keys) != 0 {
		t.Fatalf("refusals stored keys: %s", raw)
	}
}

// An expired key is a 401 that says so, and a wrong key (a key's form, no
// key's secret) is charged to the address's failed-authentication budget
// like a wrong token.
func TestExpiredAndWrongKeys(t *testing.T) {
	const attacker = "203.0.113.7"
	s := authStack(t, 3)
	k := createKey(t, s, map[string]any{"name": "short", "role": "viewer", "expires_in": "1s"})
	if a := callAt(t, s, s.API.URL, "GET", "/push/stats", k.Key, nil, nil); a.status != http.StatusOK {
		t.Fatalf("before its expiry: %d %s", a.status, a.raw)
	}
	waitUntil(t, "the key expires", 5*time.Second, func() bool {
		a := callAt(t, s, s.API.URL, "GET", "/push/stats", k.Key, nil, nil)
		if a.status == http.StatusUnauthorized {
			if msg := a.err.Error.Message; !strings.Contains(msg, "expired at") || !strings.Contains(msg, k.ID) {
				t.Fatalf("expired key's 401: %s", a.raw)
			}
			return true
		}
		return false
	})
	wrong := "pfk_" + strings.Repeat("x", 43)
	for i := range 3 {
		if a := from(t, s, attacker, "GET", "/push/stats", wrong, ""); a.status != http.StatusUnauthorized {
			t.Fatalf("wrong key #%d: %+v", i+1, a)
		}
	}
	if a := from(t, s, attacker, "GET", "/push/stats", wrong, ""); a.status != http.StatusTooManyRequests {
		t.Fatalf("the fourth wrong key: %+v, want 429 (the budget of 3 is spent)", a)
	}
	if a := from(t, s, attacker, "GET", "/push/stats", teststack.AdminToken, ""); a.status != http.StatusTooManyRequests {
		t.Fatalf("a right token from the address whose budget is spent: %+v, want 429", a)
	}
}

// With four-eyes on, the actor that created a held broadcast cannot
// release it, whatever its role: an admin token, an approver key and an
// approver token are each refused their own; another actor, even one of
// the same name (a key and a token both called alice), releases it.
func TestFourEyesComparesActorsNotNames(t *testing.T) {
	t.Parallel()
	s := heldStack(t, func(c *config.Config) { c.Engine.ReleaseFourEyes = true })
	s.SeedTokens(1, tokens("ok-", 5))
	aliceKey := createKey(t, s, map[string]any{"name": "alice", "role": "approver"})
	release := func(id uint64, token string) keyAnswer {
		var b teststack.Broadcast
		a := callAt(t, s, s.API.URL, "POST", "/push/broadcasts/"+itoa(id)+"/release", token, nil, &b)
		if a.status == http.StatusOK && (b.Status == "held" || b.ReleasedBy == "") {
			t.Fatalf("released: %+v", b)
		}
		return a
	}
	refused := func(what string, a keyAnswer) {
		t.Helper()
		if a.status != http.StatusForbidden || a.err.Error.Code != "four_eyes_required" || !strings.Contains(a.err.Error.Message, "PUSHFAN_RELEASE_FOUR_EYES") {
			t.Fatalf("%s: %d %s; want 403 four_eyes_required", what, a.status, a.raw)
		}
	}
	for _, c := range []struct {
		what, creator, other, otherName string
	}{
		{"the alice key's broadcast", aliceKey.Key, aliceToken, "alice"},
		{"the alice token's broadcast", aliceToken, aliceKey.Key, "alice"},
		{"an admin token's broadcast", teststack.AdminToken, bobToken, "bob"},
	} {
		b := hold(t, s, c.creator, 5, nil)
		refused(c.what+" released by its creator", release(b.ID, c.creator))
		var r teststack.Broadcast
		if a := callAt(t, s, s.API.URL, "POST", "/push/broadcasts/"+itoa(b.ID)+"/release", c.other, nil, &r); a.status != http.StatusOK || r.ReleasedBy != c.otherName {
			t.Fatalf("%s released by another actor: %d %s", c.what, a.status, a.raw)
		}
		var kind, id string
		if err := s.SQL.QueryRow("SELECT released_by_kind, released_by_id FROM broadcasts WHERE id = ?", b.ID).Scan(&kind, &id); err != nil {
			t.Fatal(err)
		}
		wantKind, wantID := "token", c.otherName
		if c.other == aliceKey.Key {
			wantKind, wantID = "key", aliceKey.ID
		}
		if kind != wantKind || id != wantID {
			t.Fatalf("%s: released by %s %s; want %s %s", c.what, kind, id, wantKind, wantID)
		}
		if done := s.WaitFinished(b.ID, 30*time.Second); done.Status != "completed" || done.Succeeded != 5 {
			t.Fatalf("%s: %+v", c.what, done)
		}
	}
}

// People are actors too (OIDC sign-in makes them): two people of one
// name are two, and the one who created a held broadcast cannot release
// it. A broadcast stored before actors were (no created_by_kind) was
// created by the environment token its created_by names.
func TestFourEyesByPersonAndForOlderRows(t *testing.T) {
	t.Parallel()
	s := heldStack(t, func(c *config.Config) { c.Engine.ReleaseFourEyes = true })
	s.SeedTokens(1, tokens("ok-", 5))
	ctx := context.Background()
	ann := model.Actor{Kind: model.ActorPerson, ID: "sub-ann-1", Name: "Ann"}
	otherAnn := model.Actor{Kind: model.ActorPerson, ID: "sub-ann-2", Name: "Ann"}
	b := hold(t, s, teststack.AdminToken, 5, nil)
	s.MustExec("UPDATE broadcasts SET created_by = 'Ann', created_by_kind = 'person', created_by_id = 'sub-ann-1' WHERE id = ?", b.ID)
	if _, err := s.Service.Release(ctx, b.ID, ann); !errors.Is(err, broadcast.ErrFourEyes) {
		t.Fatalf("Ann's release of her own: %v", err)
	}
	r, err := s.Service.Release(ctx, b.ID, otherAnn)
	if err != nil || r.ReleasedBy != "Ann" || r.Releaser != otherAnn || r.CreatorActor() != ann {
		t.Fatalf("the other Ann's release: %+v %v", r, err)
	}
	old := hold(t, s, aliceToken, 5, nil)
	s.MustExec("UPDATE broadcasts SET created_by_kind = NULL, created_by_id = NULL WHERE id = ?", old.ID)
	a := callAt(t, s, s.API.URL, "POST", "/push/broadcasts/"+itoa(old.ID)+"/release", aliceToken, nil, nil)
	if a.status != http.StatusForbidden || a.err.Error.Code != "four_eyes_required" {
		t.Fatalf("alice's release of her own older row: %d %s", a.status, a.raw)
	}
	if a := callAt(t, s, s.API.URL, "POST", "/push/broadcasts/"+itoa(old.ID)+"/release", bobToken, nil, nil); a.status != http.StatusOK {
		t.Fatalf("bob's release of alice's older row: %d %s", a.status, a.raw)
	}
	for _, id := range []uint64{b.ID, old.ID} {
		if done := s.WaitFinished(id, 30*time.Second); done.Status != "completed" || done.Succeeded != 5 {
			t.Fatalf("broadcast %d: %+v", id, done)
		}
	}
}

// A key limited to some apps is held to them as a token is; a caller
// limited to some apps may not manage keys (it could make itself a key of
// every app).
func TestKeysOfSomeApps(t *testing.T) {
	t.Parallel()
	const partnerAdmin = "partner-admin-secret-0123456789"
	s, _ := appsStack(t, 1, 1, "partner-ops:admin:"+partnerAdmin+":partner")
	if a := callAt(t, s, s.API.URL, "GET", "/push/keys", partnerAdmin, nil, nil); a.status != http.StatusForbidden || a.err.Error.Code != "forbidden_app" {
		t.Fatalf("an admin of one app listing keys: %d %s", a.status, a.raw)
	}
	if a := callAt(t, s, s.API.URL, "POST", "/push/keys", partnerAdmin, map[string]any{"name": "x", "role": "admin"}, nil); a.status != http.StatusForbidden || a.err.Error.Code != "forbidden_app" {
		t.Fatalf("an admin of one app creating a key: %d %s", a.status, a.raw)
	}
	k := createKey(t, s, map[string]any{"name": "partner-cron", "role": "sender", "apps": []string{"partner"}})
	if len(k.Apps) != 1 || k.Apps[0] != "partner" {
		t.Fatalf("created %+v", k)
	}
	msg := map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}}
	msg["app"] = "consumer"
	if a := callAt(t, s, s.API.URL, "POST", "/push/broadcast", k.Key, msg, nil); a.status != http.StatusForbidden || a.err.Error.Code != "forbidden_app" {
		t.Fatalf("the partner key sending for consumer: %d %s", a.status, a.raw)
	}
	msg["app"] = "partner"
	var b teststack.Broadcast
	if a := callAt(t, s, s.API.URL, "POST", "/push/broadcast", k.Key, msg, &b); a.status != http.StatusOK || b.Status != "completed" || b.Succeeded != 1 || b.CreatedBy != "partner-cron" {
		t.Fatalf("the partner key sending for partner: %d %s", a.status, a.raw)
	}
}
