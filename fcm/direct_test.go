package fcm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"firebase.google.com/go/v4/errorutils"
	"firebase.google.com/go/v4/messaging"

	"pushfan/fanout"
	"pushfan/fcmemu"
)

// recordBodies wraps h and keeps the last request body per token.
type recordBodies struct {
	h      http.Handler
	mu     sync.Mutex
	bodies map[string][]byte
	header map[string]http.Header
}

func (rb *recordBodies) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		Message struct {
			Token string `json:"token"`
		} `json:"message"`
	}
	_ = json.Unmarshal(body, &req)
	tok := req.Message.Token
	rb.mu.Lock()
	rb.bodies[tok] = body
	rb.header[tok] = r.Header.Clone()
	rb.mu.Unlock()
	rb.h.ServeHTTP(w, r)
}

func (rb *recordBodies) take(tok string) ([]byte, http.Header) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	b, h := rb.bodies[tok], rb.header[tok]
	delete(rb.bodies, tok)
	return b, h
}

// The direct client must be indistinguishable from messaging.Client.Send:
// byte-identical request bodies and the same SDK headers, and for every
// answer the emulator can give, the same classification (class, code and
// Retry-After) as Classify gives the SDK's error.
func TestDirectClientMatchesTheSDK(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	rb := &recordBodies{h: emu.Handler(), bodies: map[string][]byte{}, header: map[string]http.Header{}}
	srv := httptest.NewServer(rb)
	defer srv.Close()

	senders := map[string]*Client{}
	for _, c := range []string{ClientSDK, ClientDirect} {
		s, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1", ProjectID: "equiv", Concurrency: 4, Client: c})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		senders[c] = s
	}
	if senders[ClientDirect].direct == nil || senders[ClientSDK].direct != nil {
		t.Fatal("Client did not pick the implementation")
	}

	plain := &fanout.Message{Title: "Hi \"you\" <b>&</b>", Body: "ünïcødé ✓", Image: "https://example.com/i.png",
		Data:     map[string]string{"k": "v", "deep_link": "app://x?a=1&b=2"},
		Delivery: fanout.Delivery{DisplayTag: "pushfan-7", AndroidPriority: "normal", APNSPriority: "5", TTL: 28 * 24 * time.Hour, Built: time.Now()}}
	dry := &fanout.Message{Body: "dry", DryRun: true}
	reserved := &fanout.Message{Body: "x", Data: map[string]string{"from": "nope"}}
	// All four platform override objects, every field the rules accept.
	overrides := &fanout.Message{Title: "o", Body: "p", Data: map[string]string{"k": "v"}, Delivery: fanout.Delivery{DisplayTag: "pushfan-8"}, Platform: samplePlatform()}
	overridesDry := &fanout.Message{Body: "dry", Delivery: fanout.Delivery{DisplayTag: "pushfan-8"}, Platform: samplePlatform(), DryRun: true}

	cases := []struct {
		name  string
		msg   *fanout.Message
		token string
		want  fanout.Class // what both must agree on, as a sanity check of the case
		code  string
	}{
		{"success", plain, "ok-token-1", fanout.Success, ""},
		{"dry run", dry, "ok-token-2", fanout.Success, ""},
		{"platform overrides", overrides, "ok-token-4", fanout.Success, ""},
		{"platform overrides, dry run", overridesDry, "ok-token-5", fanout.Success, ""},
		{"platform overrides, unregistered", overrides, "unregistered-2", fanout.Dead, CodeUnregistered},
		{"unregistered", plain, "unregistered-1", fanout.Dead, CodeUnregistered},
		{"sender id mismatch", plain, "mismatch-1", fanout.Dead, CodeMismatch},
		{"invalid token", plain, "invalid-1", fanout.Dead, CodeInvalidArg},
		{"reserved data key (the message is bad)", reserved, "ok-token-3", fanout.Fatal, CodeInvalidArg},
		{"per-token quota", plain, "quota-1", fanout.Transient, fanout.CodeQuota},
		{"unavailable", plain, "unavailable-1", fanout.Transient, CodeUnavailable},
		{"internal", plain, "internal-1", fanout.Transient, CodeInternal},
		{"third-party auth", plain, "auth-1", fanout.Fatal, CodeThirdParty},
		{"token needing JSON escapes", plain, "ok-\"quoted\"-<tag>&", fanout.Dead, CodeInvalidArg},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]fanout.Outcome{}
			var bodies [][]byte
			var headers []http.Header
			for _, c := range []string{ClientSDK, ClientDirect} {
				// One attempt: the budget transport stops the SDK's own 503
				// retries as it does in the engine.
				got[c] = send(t, senders[c], tc.msg, tc.token, fanout.Budget{Max: 1})
				if got[c].Requests != 1 {
					t.Fatalf("%s made %d requests with a budget of one", c, got[c].Requests)
				}
				b, h := rb.take(tc.token)
				bodies, headers = append(bodies, b), append(headers, h)
			}
			// The one classifier must agree with the SDK's own predicates.
			if sdkCode := sdkPredicateCode(rawSDKError(senders[ClientSDK], tc.msg, tc.token)); sdkCode != tc.code {
				t.Fatalf("the SDK's predicates say %q, the case expects %q", sdkCode, tc.code)
			}
			rb.take(tc.token)
			sdk, direct := got[ClientSDK], got[ClientDirect]
			if sdk.Class != tc.want || sdk.Code != tc.code {
				t.Fatalf("the SDK's outcome is %v/%s, the case expects %v/%s (%s)", sdk.Class, sdk.Code, tc.want, tc.code, sdk.Detail)
			}
			if direct.Class != sdk.Class || direct.Code != sdk.Code || direct.RetryAfter != sdk.RetryAfter {
				t.Fatalf("direct %v/%s/%v, SDK %v/%s/%v\n direct: %s\n sdk: %s", direct.Class, direct.Code, direct.RetryAfter,
					sdk.Class, sdk.Code, sdk.RetryAfter, direct.Detail, sdk.Detail)
			}
			// Both report FCM's message id on success (each send has its
			// own), and none on failure.
			for c, out := range got {
				if ok := strings.HasPrefix(out.MessageID, "projects/equiv/messages/") && len(out.MessageID) > len("projects/equiv/messages/"); ok != (out.Class == fanout.Success) {
					t.Fatalf("%s: class %v with message id %q", c, out.Class, out.MessageID)
				}
			}
			if sdk.Class == fanout.Success && sdk.MessageID == direct.MessageID {
				t.Fatalf("two sends got the same message id %q", sdk.MessageID)
			}
			if len(bodies[0]) == 0 || !bytes.Equal(bodies[0], bodies[1]) {
				t.Fatalf("request bodies differ:\n sdk:    %s\n direct: %s", bodies[0], bodies[1])
			}
			for _, k := range []string{"Content-Type", "X-Goog-Api-Format-Version", "X-Firebase-Client", "X-Goog-Api-Client"} {
				if headers[0].Get(k) == "" || headers[0].Get(k) != headers[1].Get(k) {
					t.Fatalf("header %s: sdk %q, direct %q", k, headers[0].Get(k), headers[1].Get(k))
				}
			}
		})
	}

	// The project quota: 429 with an ErrorInfo and no FcmError, Retry-After in seconds.
	t.Run("project quota", func(t *testing.T) {
		if err := emu.SetConfig(fcmemu.Config{QuotaLimit: 1, QuotaWindow: time.Hour}); err != nil {
			t.Fatal(err)
		}
		_ = send(t, senders[ClientSDK], plain, "ok-fill", fanout.Budget{Max: 1}) // spends the window
		sdk := send(t, senders[ClientSDK], plain, "ok-q1", fanout.Budget{Max: 1})
		direct := send(t, senders[ClientDirect], plain, "ok-q2", fanout.Budget{Max: 1})
		if sdk.Code != fanout.CodeQuota || sdk.RetryAfter < 59*time.Minute {
			t.Fatalf("the SDK's outcome is %s, retry after %v", sdk.Code, sdk.RetryAfter)
		}
		if direct.Class != sdk.Class || direct.Code != sdk.Code || direct.RetryAfter.Round(time.Minute) != sdk.RetryAfter.Round(time.Minute) {
			t.Fatalf("direct %v/%s/%v, SDK %v/%s/%v", direct.Class, direct.Code, direct.RetryAfter, sdk.Class, sdk.Code, sdk.RetryAfter)
		}
	})

	// The message id is FCM's "name", read the same by both clients from
	// a body laid out as Google's (indented, trailing newline).
	t.Run("message id", func(t *testing.T) {
		const name = "projects/p/messages/0:1700000000000000%31bd1c9631bd1c96"
		named := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			_, _ = io.WriteString(w, "{\n  \"name\": \""+name+"\"\n}\n")
		}))
		defer named.Close()
		for _, c := range []string{ClientSDK, ClientDirect} {
			s, err := New(context.Background(), Options{Endpoint: named.URL + "/v1", ProjectID: "p", Concurrency: 1, Client: c})
			if err != nil {
				t.Fatal(err)
			}
			out := send(t, s, plain, "ok-1", fanout.Budget{Max: 1})
			s.Close()
			if out.Class != fanout.Success || out.MessageID != name {
				t.Fatalf("%s: %v with message id %q, want %q", c, out.Class, out.MessageID, name)
			}
		}
	})

	// A project the endpoint does not know and a body that is not JSON.
	t.Run("plain HTTP errors", func(t *testing.T) {
		for _, status := range []int{http.StatusNotFound, http.StatusUnauthorized, http.StatusForbidden, http.StatusBadGateway, http.StatusTooManyRequests} {
			bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(status)
				_, _ = io.WriteString(w, "<html>nope</html>")
			}))
			got := map[string]fanout.Outcome{}
			for _, c := range []string{ClientSDK, ClientDirect} {
				s, err := New(context.Background(), Options{Endpoint: bare.URL + "/v1", ProjectID: "p", Concurrency: 1, Client: c})
				if err != nil {
					t.Fatal(err)
				}
				got[c] = send(t, s, plain, "ok-1", fanout.Budget{Max: 1})
				s.Close()
			}
			bare.Close()
			sdk, direct := got[ClientSDK], got[ClientDirect]
			if direct.Class != sdk.Class || direct.Code != sdk.Code || direct.RetryAfter != sdk.RetryAfter {
				t.Fatalf("HTTP %d: direct %v/%s/%v, SDK %v/%s/%v", status, direct.Class, direct.Code, direct.RetryAfter, sdk.Class, sdk.Code, sdk.RetryAfter)
			}
		}
	})
}

// The SDK's own retries of a 503 stop at the token's budget: each engine
// attempt may hide several requests, never more than the budget left.
func TestSDKRetriesStopAtTheBudget(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(emu.Handler())
	defer srv.Close()
	c, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1", ProjectID: "budget", Concurrency: 1, Client: ClientSDK})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := send(t, c, &fanout.Message{Body: "x"}, "unavailable-budget", fanout.Budget{Used: 1, Max: 3})
	if out.Class != fanout.Transient || out.Code != CodeUnavailable || out.Requests != 2 {
		t.Fatalf("outcome %+v, want UNAVAILABLE after the 2 requests left", out)
	}
	if n := emu.Counts("unavailable-budget").Attempts; n != 2 {
		t.Fatalf("the emulator saw %d requests, want 2", n)
	}
}

// send prepares msg and makes one attempt at token.
func send(t *testing.T, c *Client, msg *fanout.Message, token string, b fanout.Budget) fanout.Outcome {
	t.Helper()
	p, err := c.Prepare(msg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Send(ctx, token, b)
}

// rawSDKError is the SDK's own error for msg to token, to ask the SDK's
// predicates about.
func rawSDKError(c *Client, msg *fanout.Message, token string) error {
	m, err := sdkMessage(msg)
	if err != nil {
		return err
	}
	m.Token = token
	ctx := withAttempts(context.Background(), &attemptState{max: 1, stop: func(error) {}})
	if msg.DryRun {
		_, err = c.client.SendDryRun(ctx, &m)
	} else {
		_, err = c.client.Send(ctx, &m)
	}
	return err
}

func TestNewRejectsAnUnknownClient(t *testing.T) {
	_, err := New(context.Background(), Options{Endpoint: "http://127.0.0.1:1/v1", ProjectID: "p", Client: "grpc"})
	if err == nil || !strings.Contains(err.Error(), `"grpc"`) {
		t.Fatalf("err = %v", err)
	}
}

// sdkPredicateCode names err's code by the firebase SDK's predicates alone.
func sdkPredicateCode(err error) string {
	switch {
	case err == nil:
		return ""
	case messaging.IsUnregistered(err):
		return CodeUnregistered
	case messaging.IsSenderIDMismatch(err):
		return CodeMismatch
	case messaging.IsInvalidArgument(err):
		return CodeInvalidArg
	case messaging.IsQuotaExceeded(err), errorutils.IsResourceExhausted(err):
		return fanout.CodeQuota
	case messaging.IsUnavailable(err):
		return CodeUnavailable
	case messaging.IsInternal(err):
		return CodeInternal
	case messaging.IsThirdPartyAuthError(err):
		return CodeThirdParty
	}
	return "?"
}

// messageName's fast path reads what encoding/json reads, and leaves every
// other body to it.
func TestMessageNameAgreesWithEncodingJSON(t *testing.T) {
	for _, body := range []string{
		`{"name":"projects/p/messages/1"}`,
		"{\n  \"name\": \"projects/p/messages/0:17%ab\"\n}\n",
		`{"name":"projects/p/messages/\u0031"}`,
		`{"name":"a\"b"}`,
		`{"name":"x","other":1}`,
		`{"other":1,"name":"y"}`,
		`{"name":"x"} trailing`,
		`{"name":3}`,
		`{}`,
		``,
		`not json`,
	} {
		var r struct {
			Name string `json:"name"`
		}
		want := r.Name
		if json.Unmarshal([]byte(body), &r) == nil {
			want = r.Name
		}
		if got := messageName([]byte(body)); got != want {
			t.Errorf("messageName(%q) = %q, encoding/json reads %q", body, got, want)
		}
	}
}
