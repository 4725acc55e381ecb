package server_test

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
	"pushfan/model"
)

// The tokens of the resend test, by what the emulator does with them: ok
// ones deliver at once; flaky3xunavailable- ones answer UNAVAILABLE to
// their first three requests (every attempt of a broadcast with a budget
// of 3) and then recover; unavailable- ones never recover; unregistered-
// ones are dead. gone and off fail like the flaky ones but are no longer
// valid targets when the resend comes (token invalidated, push disabled).
var (
	resendOK      = tokens("ok-", 5)
	resendFlaky   = tokens("flaky3xunavailable-", 4)
	resendDown    = tokens("unavailable-", 2)
	resendDead    = tokens("unregistered-", 2)
	resendGone    = "flaky3xunavailable-gone"
	resendOff     = "flaky3xunavailable-off"
	resendTargets = len(resendOK) + len(resendFlaky) + len(resendDown) + len(resendDead) + 2
)

func resendStack(t *testing.T) *teststack.Stack {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.Engine.MaxAttempts = 3 }})
	var all []string
	all = append(all, resendOK...)
	all = append(all, resendFlaky...)
	all = append(all, resendDown...)
	all = append(all, resendDead...)
	s.SeedTokens(1, append(all, resendGone, resendOff))
	return s
}

// postWithKey POSTs an empty body with an Idempotency-Key and decodes the
// answer into out.
func postWithKey(t *testing.T, s *teststack.Stack, path, key string, out any) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", s.API.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+teststack.AdminToken)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	decode(t, readAll(t, resp), out)
	return resp
}

func wantCounts(t *testing.T, s *teststack.Stack, toks []string, attempts, accepted int64) {
	t.Helper()
	for _, tk := range toks {
		if c := s.Emu.Counts(tk); c.Attempts != attempts || c.Accepted != accepted {
			t.Fatalf("token %s: %+v, want %d attempts and %d accepted", tk, c, attempts, accepted)
		}
	}
}

func TestResendSendsToExactlyTheRecoverableFailures(t *testing.T) {
	s := resendStack(t)
	var orig teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "Sale", "body": "50% off", "data": map[string]string{"k": "v"},
		"audience": map[string]any{"all": true}}, &orig)
	orig = s.WaitFinished(orig.ID, 30*time.Second)
	failing := int64(len(resendFlaky) + len(resendDown) + 2)
	if orig.Status != "completed" || orig.Targeted != int64(resendTargets) || orig.Succeeded != int64(len(resendOK)) ||
		orig.Failed != failing+int64(len(resendDead)) ||
		!reflect.DeepEqual(orig.Errors, map[string]int64{"UNAVAILABLE": failing, "UNREGISTERED": int64(len(resendDead))}) {
		t.Fatalf("original: %+v", orig)
	}
	wantCounts(t, s, resendFlaky, 3, 0)
	wantCounts(t, s, []string{resendGone, resendOff}, 3, 0)
	wantCounts(t, s, resendDown, 3, 0)

	path := fmt.Sprintf("/push/broadcasts/%d/resend", orig.ID)
	for _, c := range []struct {
		body       any
		code, want string
	}{
		{map[string]any{"codes": []string{"UNREGISTERED"}}, "code_not_resendable", "codes"},
		{map[string]any{"codes": []string{"UNAVAILABLE", "SENDER_ID_MISMATCH"}}, "code_not_resendable", "codes"},
		{map[string]any{"codes": []string{"INVALID_ARGUMENT"}}, "code_not_resendable", "codes"},
		{map[string]any{"codes": []string{"NO_SUCH_CODE"}}, "unknown_code", "codes"},
		{map[string]any{"codes": []string{}}, "invalid_value", "codes"},
		{map[string]any{"codes": "UNAVAILABLE"}, "invalid_type", "codes"},
		{map[string]any{"title": "x"}, "unknown_field", "title"},
	} {
		var e teststack.ErrorBody
		if resp := s.Do("POST", path, c.body, &e); resp.StatusCode != http.StatusBadRequest || e.Error.Code != c.code || e.Error.Field != c.want {
			t.Fatalf("resend %v: %d %+v, want 400 %s on %s", c.body, resp.StatusCode, e, c.code, c.want)
		}
	}
	if st := s.Emu.Stats(); st.Requests != int64(len(resendOK)+len(resendDead))+3*failing {
		t.Fatalf("a refused resend sent something: %+v", st)
	}

	// Since the original: one failed token died, one user turned push off.
	s.MustExec("UPDATE device_tokens SET invalidated_at = NOW(6) WHERE token = ?", resendGone)
	s.MustExec("UPDATE users u JOIN device_tokens t ON t.user_id = u.id SET u.push_enabled = 0 WHERE t.token = ?", resendOff)

	var r teststack.Broadcast
	req := postWithKey(t, s, path, "resend-1", &r)
	if req.StatusCode != http.StatusOK {
		t.Fatalf("resend: %d %+v", req.StatusCode, r)
	}
	want := int64(len(resendFlaky) + len(resendDown))
	if r.Status != "completed" || r.Trigger != "resend" || r.ParentID != orig.ID || r.Targeted != want ||
		r.Succeeded != int64(len(resendFlaky)) || r.Failed != int64(len(resendDown)) || r.Canceled != 0 ||
		!reflect.DeepEqual(r.Errors, map[string]int64{"UNAVAILABLE": int64(len(resendDown))}) {
		t.Fatalf("resend: %+v, want %d targeted", r, want)
	}
	var full struct {
		Message  model.Message  `json:"message"`
		Audience model.Audience `json:"audience"`
	}
	s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", r.ID), nil, &full)
	if full.Message.Title != "Sale" || full.Message.Body != "50% off" || full.Message.Data["k"] != "v" ||
		full.Audience.ResendOf != orig.ID || !reflect.DeepEqual(full.Audience.Codes, []string{"INTERNAL", "NETWORK_ERROR", "QUOTA_EXCEEDED", "TIMEOUT", "UNAVAILABLE"}) {
		t.Fatalf("resend's message and audience: %+v", full)
	}
	// Exactly the recoverable failures got one more request each, and
	// nothing else was sent.
	wantCounts(t, s, resendFlaky, 4, 1)
	wantCounts(t, s, resendDown, 6, 0)
	wantCounts(t, s, resendOK, 1, 1)
	wantCounts(t, s, resendDead, 1, 0)
	wantCounts(t, s, []string{resendGone, resendOff}, 3, 0)
	if st := s.Emu.Stats(); st.Accepted != int64(len(resendOK)+len(resendFlaky)) {
		t.Fatalf("emulator accepted %d in all", st.Accepted)
	}

	// The same Idempotency-Key answers the same resend and sends nothing.
	var again teststack.Broadcast
	resp := postWithKey(t, s, path, "resend-1", &again)
	if resp.StatusCode != http.StatusOK || again.ID != r.ID || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replayed resend: %d %+v", resp.StatusCode, again)
	}
	wantCounts(t, s, resendFlaky, 4, 1)

	// A resend of the resend reaches the tokens that are still down.
	var rr teststack.Broadcast
	s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/resend", r.ID), map[string]any{"codes": []string{"UNAVAILABLE"}}, &rr)
	if rr.Status != "completed" || rr.ParentID != r.ID || rr.Targeted != int64(len(resendDown)) || rr.Failed != int64(len(resendDown)) {
		t.Fatalf("resend of the resend: %+v", rr)
	}
	wantCounts(t, s, resendDown, 9, 0)
	wantCounts(t, s, resendFlaky, 4, 1)

	var page listPage
	s.Do("GET", "/push/broadcasts?trigger=resend", nil, &page)
	if len(page.Broadcasts) != 2 {
		t.Fatalf("list ?trigger=resend: %+v", page)
	}
}

func TestResendRefusals(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.MaxAttempts = 1
		c.Engine.SendTimeout = time.Second
	}})
	s.SeedTokens(1, append(tokens("hang-", 1), tokens("ok-", 3)...))
	var e teststack.ErrorBody

	// 409 while it runs: a hanging token keeps it running.
	var running teststack.Broadcast
	s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "t", "audience": map[string]any{"all": true}}, &running)
	waitUntil(t, "the broadcast running", 10*time.Second, func() bool {
		s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", running.ID), nil, &running)
		return running.Status == "running"
	})
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/resend", running.ID), nil, &e); resp.StatusCode != http.StatusConflict || e.Error.Code != "not_finished" {
		t.Fatalf("resend while running: %d %+v", resp.StatusCode, e)
	}
	done := s.WaitFinished(running.ID, 30*time.Second)
	if done.Errors["TIMEOUT"] != 1 || done.Succeeded != 3 {
		t.Fatalf("the hanging broadcast: %+v", done)
	}

	// 409 while held.
	var held teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "hold": true, "audience": map[string]any{"user_ids": []int{2}}}, &held)
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/resend", held.ID), nil, &e); resp.StatusCode != http.StatusConflict || e.Error.Code != "not_finished" {
		t.Fatalf("resend while held: %d %+v", resp.StatusCode, e)
	}

	// 409 when no failure has the codes asked for.
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/resend", done.ID), map[string]any{"codes": []string{"INTERNAL"}}, &e); resp.StatusCode != http.StatusConflict || e.Error.Code != "nothing_to_resend" {
		t.Fatalf("resend with nothing to resend: %d %+v", resp.StatusCode, e)
	}

	// 409 for a named audience's broadcast: its failures carry no token id.
	named := &model.Broadcast{
		Submission: model.Submission{
			Message:  model.Message{Title: "n"},
			Audience: model.Audience{Name: "vip", Params: []byte(`{}`)},
		},
		Status: model.StatusCompleted,
		Counts: model.Counts{Failed: 1, Targeted: 1, Errors: map[string]int64{"UNAVAILABLE": 1}}}
	if err := s.Leases.Create(t.Context(), named); err != nil {
		t.Fatal(err)
	}
	s.MustExec("INSERT INTO broadcast_failures (broadcast_id, token_id, user_id, code) VALUES (?, 0, 7, 'UNAVAILABLE')", named.ID)
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/resend", named.ID), nil, &e); resp.StatusCode != http.StatusConflict || e.Error.Code != "failures_unresolvable" {
		t.Fatalf("resend of a named audience: %d %+v", resp.StatusCode, e)
	}

	if resp := s.Do("POST", "/push/broadcasts/999999/resend", nil, &e); resp.StatusCode != http.StatusNotFound || e.Error.Code != "not_found" {
		t.Fatalf("resend of an unknown broadcast: %d %+v", resp.StatusCode, e)
	}
	var n int
	if err := s.SQL.Get(&n, "SELECT COUNT(*) FROM broadcasts WHERE trigger_kind = 'resend'"); err != nil || n != 0 {
		t.Fatalf("%d resend broadcasts stored by refused requests (%v)", n, err)
	}
}

// A resend keeps the original's quiet hours (and local time): failures
// resent while their users are inside the quiet window wait for its end,
// as the original's sends would have.
func TestResendKeepsTheQuietHours(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.Engine.MaxAttempts = 2 }})
	down := tokens("unavailable-", 5)
	s.SeedTokens(1, down)
	s.MustExec("UPDATE users SET timezone = 'UTC'")
	// A window starting seconds from now: the original goes out before it,
	// the resend comes inside it.
	start := time.Now().UTC().Add(6 * time.Second).Truncate(time.Second)
	quiet := map[string]any{"start": start.Format("15:04:05"), "end": start.Add(time.Hour).Format("15:04:05")}
	var orig teststack.Broadcast
	s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "t", "audience": map[string]any{"all": true}, "quiet_hours": quiet}, &orig)
	orig = s.WaitFinished(orig.ID, 30*time.Second)
	if orig.Failed != 5 || orig.Deferred == nil || *orig.Deferred != 0 {
		t.Fatalf("original: %+v, want 5 failed, none deferred", orig)
	}
	if time.Now().After(start) {
		t.Skipf("the original took until %v, past the window's start %v: the machine is too slow for this test", time.Now(), start)
	}
	wantCounts(t, s, down, 2, 0)
	time.Sleep(time.Until(start) + 100*time.Millisecond)
	var r teststack.Broadcast
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/resend?wait=0", orig.ID), nil, &r); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("resend: %d %+v", resp.StatusCode, r)
	}
	r = s.WaitPlanned(r.ID, 10*time.Second)
	if r.QuietHours == nil || r.QuietHours.Start != quiet["start"] || r.Deferred == nil || *r.Deferred != 5 || waiting(r) != 5 || r.Targeted != 5 {
		t.Fatalf("resend: %+v, want the original's quiet hours, its 5 targets deferred and waiting", r)
	}
	time.Sleep(300 * time.Millisecond) // several dispatcher polls
	wantCounts(t, s, down, 2, 0)
	var c teststack.Broadcast
	s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", r.ID), nil, &c)
	if c.Status != "canceled" || c.Canceled != 5 {
		t.Fatalf("canceled resend: %+v", c)
	}
	wantCounts(t, s, down, 2, 0)
}
