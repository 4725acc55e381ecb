package fcmemu_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"firebase.google.com/go/v4/errorutils"
	"firebase.google.com/go/v4/messaging"

	"pushfan/fcmemu"
)

var nameRE = regexp.MustCompile(`^projects/demo-project/messages/0:[0-9]+%[0-9a-f]+$`)

func TestSendSuccessReturnsUniqueName(t *testing.T) {
	_, ts := startEmu(t, fcmemu.Config{})
	c := sdkClient(t, ts.URL)
	seen := map[string]bool{}
	for i := range 3 {
		name, err := send(t, c, "good-token")
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if !nameRE.MatchString(name) {
			t.Fatalf("name %q does not look like FCM's", name)
		}
		if seen[name] {
			t.Fatalf("name %q returned twice", name)
		}
		seen[name] = true
	}
	if got := tokenCounts(t, ts.URL, "good-token"); got != (fcmemu.TokenCounts{Accepted: 3, Attempts: 3}) {
		t.Fatalf("counts = %+v", got)
	}
}

func TestSendDryRunCountsValidated(t *testing.T) {
	_, ts := startEmu(t, fcmemu.Config{})
	c := sdkClient(t, ts.URL)
	name, err := c.SendDryRun(context.Background(), msg("dry-token"))
	if err != nil || !nameRE.MatchString(name) {
		t.Fatalf("SendDryRun = %q, %v", name, err)
	}
	if got := tokenCounts(t, ts.URL, "dry-token"); got != (fcmemu.TokenCounts{Validated: 1, Attempts: 1}) {
		t.Fatalf("counts = %+v", got)
	}
	if s := stats(t, ts.URL); s.Validated != 1 || s.Accepted != 0 || s.ByCode["OK"] != 1 {
		t.Fatalf("stats = %+v", s)
	}
	// Prefix outcomes apply to validate_only too.
	_, err = c.SendDryRun(context.Background(), msg("unregistered-dry"))
	if !messaging.IsUnregistered(err) {
		t.Fatalf("SendDryRun(unregistered-) err = %v, want UNREGISTERED", err)
	}
}

// messageSize is the size the emulator measures: the compact JSON of the message the SDK sends.
// messageSize measures m as the emulator does: data and notification only.
func messageSize(t *testing.T, m *messaging.Message) int {
	b, err := json.Marshal(struct {
		Data         map[string]string       `json:"data"`
		Notification *messaging.Notification `json:"notification"`
	}{m.Data, m.Notification})
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

func TestInvalidArgumentThroughSDK(t *testing.T) {
	_, ts := startEmu(t, fcmemu.Config{})
	c := sdkClient(t, ts.URL)

	// A message of exactly 4096 bytes passes; one byte more is refused.
	exact := &messaging.Message{Token: "size-token", Data: map[string]string{"big": ""}}
	exact.Data["big"] = strings.Repeat("x", fcmemu.MaxPayloadBytes-messageSize(t, exact))
	if n := messageSize(t, exact); n != fcmemu.MaxPayloadBytes {
		t.Fatalf("test setup: size %d", n)
	}
	if _, err := c.Send(context.Background(), exact); err != nil {
		t.Fatalf("4096-byte message: %v", err)
	}
	tooBig := &messaging.Message{Token: "size-token", Data: map[string]string{"big": exact.Data["big"] + "x"}}

	cases := []struct {
		name       string
		m          *messaging.Message
		field      string
		tokenCause bool
	}{
		{"reserved from", &messaging.Message{Token: "t1", Data: map[string]string{"from": "x"}}, "message.data", false},
		{"reserved message_type", &messaging.Message{Token: "t1", Data: map[string]string{"message_type": "x"}}, "message.data", false},
		{"reserved google.", &messaging.Message{Token: "t1", Data: map[string]string{"google.c.a": "x"}}, "message.data", false},
		{"reserved gcm.", &messaging.Message{Token: "t1", Data: map[string]string{"gcm.notification.x": "x"}}, "message.data", false},
		{"payload 4097 bytes", tooBig, "message", false},
		{"invalid- prefix", &messaging.Message{Token: "invalid-abc"}, "message.token", true},
		{"bad character", &messaging.Message{Token: "abc def"}, "message.token", true},
		{"condition, reserved key", &messaging.Message{Condition: "'a' in topics", Data: map[string]string{"from": "x"}}, "message.data", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Send(context.Background(), tc.m)
			if !messaging.IsInvalidArgument(err) || !errorutils.IsInvalidArgument(err) {
				t.Fatalf("err = %v, want INVALID_ARGUMENT", err)
			}
			resp := errorutils.HTTPResponse(err)
			if resp == nil || resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("HTTPResponse = %v", resp)
			}
			var body rpcStatus
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			br := body.detail("type.googleapis.com/google.rpc.BadRequest")
			if br == nil {
				t.Fatalf("no BadRequest detail in %+v", body)
			}
			field := br["fieldViolations"].([]any)[0].(map[string]any)["field"]
			if field != tc.field {
				t.Fatalf("field violation on %v, want %s", field, tc.field)
			}
			// The documented way to tell a dead token from a bad message.
			if got := strings.Contains(err.Error(), "registration token"); got != tc.tokenCause {
				t.Fatalf("message %q: mentions registration token = %v, want %v", err.Error(), got, tc.tokenCause)
			}
		})
	}
}

// The SDK refuses two targets itself, so this rule is proven over raw HTTP, as are data values
// of the wrong type, which the SDK's map[string]string cannot express.
func TestInvalidArgumentRaw(t *testing.T) {
	_, ts := startEmu(t, fcmemu.Config{})
	url := ts.URL + "/v1/projects/p/messages:send"
	cases := []struct {
		name, body, field, msgPart string
	}{
		{"malformed json", `{"message":`, "", "Invalid JSON payload"},
		{"token and topic", `{"message":{"token":"a","topic":"b"}}`, "message", "Exactly one of"},
		{"topic and condition", `{"message":{"topic":"b","condition":"'b' in topics"}}`, "message", "Exactly one of"},
		{"no recipient", `{"message":{"data":{"a":"b"}}}`, "message", "Recipient"},
		{"no message", `{}`, "message", "message is missing"},
		{"data value number", `{"message":{"token":"a","data":{"n":1}}}`, "message.data", "TYPE_STRING"},
		{"data value object", `{"message":{"token":"a","data":{"n":{}}}}`, "message.data", "TYPE_STRING"},
		{"data not a map", `{"message":{"token":"a","data":"x"}}`, "message.data", "Invalid value"},
		{"empty token", `{"message":{"token":""}}`, "message.token", "registration token"},
		{"token not a string", `{"message":{"token":5}}`, "message.token", "registration token"},
		{"bad topic name", `{"message":{"topic":"a b"}}`, "message.topic", "topic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, b := do(t, http.MethodPost, url, tc.body)
			if code != http.StatusBadRequest {
				t.Fatalf("status %d: %s", code, b)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json; charset=UTF-8" {
				t.Fatalf("Content-Type %q", ct)
			}
			s := decodeStatus(t, b)
			if s.Error.Code != 400 || s.Error.Status != "INVALID_ARGUMENT" || !strings.Contains(s.Error.Message, tc.msgPart) {
				t.Fatalf("body %s", b)
			}
			if fe := s.detail("type.googleapis.com/google.firebase.fcm.v1.FcmError"); fe == nil || fe["errorCode"] != "INVALID_ARGUMENT" {
				t.Fatalf("FcmError detail missing: %s", b)
			}
			br := s.detail("type.googleapis.com/google.rpc.BadRequest")
			fv := br["fieldViolations"].([]any)[0].(map[string]any)
			if f, _ := fv["field"].(string); f != tc.field {
				t.Fatalf("field %q, want %q: %s", f, tc.field, b)
			}
		})
	}
}

func TestTokenPrefixesThroughSDKPredicates(t *testing.T) {
	_, ts := startEmu(t, fcmemu.Config{})
	c := sdkClient(t, ts.URL)
	cases := []struct {
		token  string
		status int
		pred   func(error) bool
	}{
		{"unregistered-a", 404, messaging.IsUnregistered},
		{"invalid-a", 400, messaging.IsInvalidArgument},
		{"mismatch-a", 403, messaging.IsSenderIDMismatch},
		{"quota-a", 429, messaging.IsQuotaExceeded},
		{"internal-a", 500, messaging.IsInternal},
		{"auth-a", 401, messaging.IsThirdPartyAuthError},
	}
	all := []func(error) bool{messaging.IsUnregistered, messaging.IsInvalidArgument, messaging.IsSenderIDMismatch,
		messaging.IsQuotaExceeded, messaging.IsInternal, messaging.IsThirdPartyAuthError, messaging.IsUnavailable}
	for _, tc := range cases {
		t.Run(tc.token, func(t *testing.T) {
			_, err := send(t, c, tc.token)
			if !tc.pred(err) {
				t.Fatalf("err = %v: predicate false", err)
			}
			matched := 0
			for _, p := range all {
				if p(err) {
					matched++
				}
			}
			if matched != 1 {
				t.Fatalf("err = %v matches %d predicates, want exactly 1", err, matched)
			}
			if resp := errorutils.HTTPResponse(err); resp == nil || resp.StatusCode != tc.status {
				t.Fatalf("HTTP response %v, want status %d", resp, tc.status)
			}
			if got := tokenCounts(t, ts.URL, tc.token); got != (fcmemu.TokenCounts{Attempts: 1}) {
				t.Fatalf("counts %+v", got)
			}
		})
	}
	t.Run("quota FcmError shape", func(t *testing.T) {
		_, err := send(t, c, "quota-b")
		if !messaging.IsQuotaExceeded(err) || !errorutils.IsResourceExhausted(err) {
			t.Fatalf("err = %v", err)
		}
		if ra := errorutils.HTTPResponse(err).Header.Get("Retry-After"); ra != "1" {
			t.Fatalf("Retry-After %q, want 1", ra)
		}
	})
	t.Run("platform predicates", func(t *testing.T) {
		_, err := send(t, c, "unregistered-b")
		if !errorutils.IsNotFound(err) {
			t.Fatalf("IsNotFound false for %v", err)
		}
		_, err = send(t, c, "mismatch-b")
		if !errorutils.IsPermissionDenied(err) {
			t.Fatalf("IsPermissionDenied false for %v", err)
		}
		_, err = send(t, c, "auth-b")
		if !errorutils.IsUnauthenticated(err) {
			t.Fatalf("IsUnauthenticated false for %v", err)
		}
	})
}

// The SDK retries 503 four times (waits 0, 1, 2, 4 s) before giving up, so this takes ~7 s; it
// runs in parallel with the rest.
func TestUnavailableThroughSDKRetries(t *testing.T) {
	t.Parallel()
	_, ts := startEmu(t, fcmemu.Config{})
	c := sdkClient(t, ts.URL)
	_, err := send(t, c, "unavailable-a")
	if !messaging.IsUnavailable(err) || !errorutils.IsUnavailable(err) {
		t.Fatalf("err = %v, want UNAVAILABLE", err)
	}
	if resp := errorutils.HTTPResponse(err); resp == nil || resp.StatusCode != 503 {
		t.Fatalf("response %v", resp)
	}
	if got := tokenCounts(t, ts.URL, "unavailable-a"); got.Attempts != 5 || got.Accepted != 0 {
		t.Fatalf("counts %+v, want 5 attempts (1 + the SDK's 4 retries)", got)
	}
}

func TestFlakyTokensSucceedOnAttemptKPlus1(t *testing.T) {
	t.Parallel()
	_, ts := startEmu(t, fcmemu.Config{})
	c := sdkClient(t, ts.URL)

	t.Run("internal", func(t *testing.T) {
		for i := 1; i <= 2; i++ {
			if _, err := send(t, c, "flaky2xinternal-a"); !messaging.IsInternal(err) {
				t.Fatalf("attempt %d: err = %v, want INTERNAL", i, err)
			}
		}
		if _, err := send(t, c, "flaky2xinternal-a"); err != nil {
			t.Fatalf("attempt 3: %v", err)
		}
		if got := tokenCounts(t, ts.URL, "flaky2xinternal-a"); got != (fcmemu.TokenCounts{Accepted: 1, Attempts: 3}) {
			t.Fatalf("counts %+v", got)
		}
	})
	t.Run("unavailable retried by the SDK", func(t *testing.T) {
		// One Send: the SDK's own retries (0 s, then 1 s) reach the third attempt.
		if _, err := send(t, c, "flaky2xunavailable-b"); err != nil {
			t.Fatalf("send: %v", err)
		}
		if got := tokenCounts(t, ts.URL, "flaky2xunavailable-b"); got != (fcmemu.TokenCounts{Accepted: 1, Attempts: 3}) {
			t.Fatalf("counts %+v", got)
		}
	})
	t.Run("quota, retried at once", func(t *testing.T) {
		_, err := send(t, c, "flaky1xquota-c")
		if !messaging.IsQuotaExceeded(err) {
			t.Fatalf("attempt 1: err = %v", err)
		}
		// Retrying without waiting the announced second works (flaky1x) but is recorded.
		if _, err := send(t, c, "flaky1xquota-c"); err != nil {
			t.Fatalf("attempt 2: %v", err)
		}
		s := stats(t, ts.URL)
		if s.RequestsDuringTokenBackoff != 1 || s.RequestsDuringBackoff != 1 || s.RequestsDuringProjectBackoff != 0 {
			t.Fatalf("backoff counters %+v, want the early retry counted once per token", s)
		}
	})
	t.Run("other kinds", func(t *testing.T) {
		for _, tc := range []struct {
			token string
			pred  func(error) bool
		}{
			{"flaky1xunregistered-d", messaging.IsUnregistered},
			{"flaky1xinvalid-d", messaging.IsInvalidArgument},
			{"flaky1xmismatch-d", messaging.IsSenderIDMismatch},
			{"flaky1xauth-d", messaging.IsThirdPartyAuthError},
		} {
			if _, err := send(t, c, tc.token); !tc.pred(err) {
				t.Fatalf("%s attempt 1: err = %v", tc.token, err)
			}
			if _, err := send(t, c, tc.token); err != nil {
				t.Fatalf("%s attempt 2: %v", tc.token, err)
			}
		}
	})
}

// rawSend posts one message for token and returns the answer's status.
func rawSend(t *testing.T, client *http.Client, base, token string) int {
	t.Helper()
	body := fmt.Sprintf(`{"message":{"token":%q,"data":{"a":"b"}}}`, token)
	resp, err := client.Post(base+"/v1/projects/p/messages:send", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestRandomErrorRatesAreSeededAndSticky(t *testing.T) {
	t.Parallel()
	cfg := fcmemu.Config{Seed: 42, ErrorRates: map[string]float64{
		fcmemu.KindInternal: 0.2, fcmemu.KindUnregistered: 0.1, fcmemu.KindUnavailable: 0.1,
	}}
	outcomes := func() []int {
		_, ts := startEmu(t, cfg)
		var out []int
		for i := range 600 {
			out = append(out, rawSend(t, ts.Client(), ts.URL, fmt.Sprintf("tok-%d", i)))
		}
		return out
	}
	a, b := outcomes(), outcomes()
	hist := map[int]int{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("token %d: %d then %d with the same seed", i, a[i], b[i])
		}
		hist[a[i]]++
	}
	// Generous bounds (over 3 standard deviations) around 10% / 20% / 10% / 60% of 600.
	within := func(n, want int) bool { return n > want*6/10 && n < want*14/10 }
	if !within(hist[404], 60) || !within(hist[500], 120) || !within(hist[503], 60) || !within(hist[200], 360) {
		t.Fatalf("histogram %v far from the configured rates", hist)
	}

	// UNREGISTERED is per token: an unregistered token stays so.
	_, ts := startEmu(t, cfg)
	for i := range 100 {
		tok := fmt.Sprintf("tok-%d", i)
		if first := rawSend(t, ts.Client(), ts.URL, tok); first == 404 {
			if again := rawSend(t, ts.Client(), ts.URL, tok); again != 404 {
				t.Fatalf("%s: unregistered then %d", tok, again)
			}
		}
	}
}

func TestErrorBodyShapes(t *testing.T) {
	_, ts := startEmu(t, fcmemu.Config{})
	url := ts.URL + "/projects/p/messages:send" // the route without /v1 works too
	cases := []struct {
		token, status, errorCode string
		code                     int
	}{
		{"unregistered-x", "NOT_FOUND", "UNREGISTERED", 404},
		{"mismatch-x", "PERMISSION_DENIED", "SENDER_ID_MISMATCH", 403},
		{"quota-x", "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", 429},
		{"unavailable-x", "UNAVAILABLE", "UNAVAILABLE", 503},
		{"internal-x", "INTERNAL", "INTERNAL", 500},
		{"auth-x", "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", 401},
	}
	for _, tc := range cases {
		code, hdr, b := do(t, http.MethodPost, url, fmt.Sprintf(`{"message":{"token":%q}}`, tc.token))
		s := decodeStatus(t, b)
		fe := s.detail("type.googleapis.com/google.firebase.fcm.v1.FcmError")
		if code != tc.code || s.Error.Code != tc.code || s.Error.Status != tc.status || fe == nil || fe["errorCode"] != tc.errorCode || s.Error.Message == "" {
			t.Fatalf("%s: %d %s", tc.token, code, b)
		}
		if hdr.Get("Content-Type") != "application/json; charset=UTF-8" {
			t.Fatalf("%s: Content-Type %q", tc.token, hdr.Get("Content-Type"))
		}
		if (tc.code == 429) != (hdr.Get("Retry-After") != "") {
			t.Fatalf("%s: Retry-After %q", tc.token, hdr.Get("Retry-After"))
		}
	}
}

// The platform objects count towards the payload limit, as pushfan's
// request rules count them.
func TestPayloadCountsPlatformObjects(t *testing.T) {
	_, ts := startEmu(t, fcmemu.Config{})
	c := sdkClient(t, ts.URL)
	fits := &messaging.Message{Token: "size-plat", Data: map[string]string{"big": ""}}
	fits.Data["big"] = strings.Repeat("x", fcmemu.MaxPayloadBytes-messageSize(t, fits)-100)
	if _, err := c.Send(context.Background(), fits); err != nil {
		t.Fatalf("4000-byte message: %v", err)
	}
	// ,"android":{"collapse_key":"..."} is 30 bytes plus the key.
	over := *fits
	over.Android = &messaging.AndroidConfig{CollapseKey: strings.Repeat("k", 71)}
	if _, err := c.Send(context.Background(), &over); !messaging.IsInvalidArgument(err) {
		t.Fatalf("4097-byte message with android: err = %v, want INVALID_ARGUMENT", err)
	}
	over.Android.CollapseKey = strings.Repeat("k", 70)
	if _, err := c.Send(context.Background(), &over); err != nil {
		t.Fatalf("4096-byte message with android: %v", err)
	}
}
