package fcmemu_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"firebase.google.com/go/v4/messaging"

	"pushfan/fcmemu"
)

// Many goroutines through one SDK client: the per-token counts and the totals must be exact.
func TestCountsExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	_, ts := startEmu(t, fcmemu.Config{Latency: 2 * time.Millisecond})
	c := sdkClient(t, ts.URL)
	const (
		workers   = 32
		perWorker = 40
		tokens    = 50
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := range perWorker {
				n := w*perWorker + i
				tok := fmt.Sprintf("tok-%d", n%tokens)
				var err error
				switch n % 4 {
				case 0:
					_, err = c.SendDryRun(ctx, msg(tok))
				case 1:
					_, err = c.Send(ctx, msg("unregistered-"+tok))
					if messaging.IsUnregistered(err) {
						err = nil
					}
				default:
					_, err = c.Send(ctx, msg(tok))
				}
				if err != nil {
					t.Errorf("send %d: %v", n, err)
					return
				}
			}
		}()
	}
	wg.Wait()

	// What each token must show: n%4 picks the kind, n%50 the token.
	want := map[string]fcmemu.TokenCounts{}
	for n := range workers * perWorker {
		tok := fmt.Sprintf("tok-%d", n%tokens)
		switch n % 4 {
		case 0:
			tc := want[tok]
			tc.Attempts++
			tc.Validated++
			want[tok] = tc
		case 1:
			tc := want["unregistered-"+tok]
			tc.Attempts++
			want["unregistered-"+tok] = tc
		default:
			tc := want[tok]
			tc.Attempts++
			tc.Accepted++
			want[tok] = tc
		}
	}
	var got countsDoc
	getJSON(t, ts.URL+"/emulator/counts", &got)
	if got.TokenCount != len(want) || len(got.Tokens) != len(want) {
		t.Fatalf("token_count %d, %d tokens; want %d", got.TokenCount, len(got.Tokens), len(want))
	}
	for tok, w := range want {
		if got.Tokens[tok] != w {
			t.Errorf("%s: got %+v, want %+v", tok, got.Tokens[tok], w)
		}
	}

	total := int64(workers * perWorker)
	s := stats(t, ts.URL)
	if s.Requests != total || s.Accepted != total/2 || s.Validated != total/4 ||
		s.ByCode["OK"] != total*3/4 || s.ByCode["UNREGISTERED"] != total/4 || s.Tokens != int64(len(want)) {
		t.Fatalf("stats %+v", s)
	}
	if s.InFlight != 0 || s.MaxInFlight < 2 || s.MaxInFlight > workers {
		t.Fatalf("in flight %d, max %d", s.InFlight, s.MaxInFlight)
	}
	if s.ConnectionsAccepted < 1 || s.CPUSeconds <= 0 || s.StartedAt.IsZero() {
		t.Fatalf("stats %+v", s)
	}
}

// The counts document is streamed and stays valid JSON for many tokens, odd ones included.
func TestCountsStreamManyTokens(t *testing.T) {
	e, ts := startEmu(t, fcmemu.Config{})
	h := e.Handler()
	const n = 5000
	for i := range n {
		body := fmt.Sprintf(`{"message":{"token":"t-%d"}}`, i)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/projects/p/messages:send", strings.NewReader(body)))
	}
	odd := "a\"b\\c\u00e9\n"
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/projects/p/messages:send",
		strings.NewReader(`{"message":{"token":"a\"b\\c\u00e9\n"}}`)))

	var got countsDoc
	getJSON(t, ts.URL+"/emulator/counts", &got)
	if got.TokenCount != n+1 || len(got.Tokens) != n+1 {
		t.Fatalf("token_count %d, tokens %d", got.TokenCount, len(got.Tokens))
	}
	if got.Tokens["t-42"] != (fcmemu.TokenCounts{Accepted: 1, Attempts: 1}) {
		t.Fatalf("t-42: %+v", got.Tokens["t-42"])
	}
	// The odd token is refused (bad characters) but its attempt is counted and escaped.
	if got.Tokens[odd] != (fcmemu.TokenCounts{Attempts: 1}) {
		t.Fatalf("odd token: %+v", got.Tokens[odd])
	}
	if e.Counts("t-7") != (fcmemu.TokenCounts{Accepted: 1, Attempts: 1}) {
		t.Fatalf("Counts(t-7) = %+v", e.Counts("t-7"))
	}

	// ?token= answers one token, zeros when unseen.
	var one countsDoc
	getJSON(t, ts.URL+"/emulator/counts?token=never-seen", &one)
	if len(one.Tokens) != 1 || one.Tokens["never-seen"] != (fcmemu.TokenCounts{}) {
		t.Fatalf("filtered counts %+v", one)
	}
}

func TestResetAndConfigEndpoints(t *testing.T) {
	e, ts := startEmu(t, fcmemu.Config{Latency: time.Millisecond})
	c := sdkClient(t, ts.URL)
	if _, err := send(t, c, "before-reset"); err != nil {
		t.Fatal(err)
	}

	code, _, b := do(t, http.MethodPost, ts.URL+"/emulator/reset", "")
	if code != http.StatusOK {
		t.Fatalf("reset: %d %s", code, b)
	}
	if s := stats(t, ts.URL); s.Requests != 0 || s.Accepted != 0 || s.Tokens != 0 || len(s.ByCode) != 0 {
		t.Fatalf("stats after reset %+v", s)
	}
	if got := tokenCounts(t, ts.URL, "before-reset"); got != (fcmemu.TokenCounts{}) {
		t.Fatalf("counts after reset %+v", got)
	}

	// PUT changes only the fields present; GET shows durations as strings.
	putConfig(t, ts.URL, `{"jitter":"5ms","error_rates":{"INTERNAL":0.25},"quota_limit":7}`)
	code, _, b = do(t, http.MethodGet, ts.URL+"/emulator/config", "")
	if code != http.StatusOK || !strings.Contains(string(b), `"latency":"1ms"`) || !strings.Contains(string(b), `"jitter":"5ms"`) {
		t.Fatalf("GET config: %d %s", code, b)
	}
	got := e.Config()
	if got.Latency != time.Millisecond || got.Jitter != 5*time.Millisecond || got.ErrorRates["INTERNAL"] != 0.25 ||
		got.QuotaLimit != 7 || got.QuotaWindow != time.Minute || got.HangMax != fcmemu.DefaultHangMax {
		t.Fatalf("config %+v", got)
	}

	for _, bad := range []string{
		`{"latency": 30}`, `{"latency": "fast"}`, `{"nope": 1}`, `{"error_rates": {"BOGUS": 0.1}}`,
		`{"error_rates": {"INTERNAL": 0.7, "UNAVAILABLE": 0.7}}`, `{"quota_limit": -1}`, `not json`,
	} {
		code, _, b := do(t, http.MethodPut, ts.URL+"/emulator/config", bad)
		if code != http.StatusBadRequest || decodeStatus(t, b).Error.Status != "INVALID_ARGUMENT" {
			t.Fatalf("PUT %s: %d %s", bad, code, b)
		}
	}
	if e.Config().QuotaLimit != 7 {
		t.Fatal("a refused PUT changed the config")
	}
	if err := e.SetConfig(fcmemu.Config{Latency: -time.Second}); err == nil || !strings.Contains(err.Error(), "latency") {
		t.Fatalf("SetConfig(negative latency) = %v", err)
	}
}

func TestUnknownRoutesAnswerRPCStatus(t *testing.T) {
	_, ts := startEmu(t, fcmemu.Config{})
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/nope"},
		{http.MethodGet, "/v1/projects/p/messages:send"},
		{http.MethodPost, "/v1/projects/p/messages:batchSend"},
		{http.MethodDelete, "/emulator/config"},
	} {
		code, hdr, b := do(t, tc.method, ts.URL+tc.path, "")
		s := decodeStatus(t, b)
		if code != 404 || s.Error.Code != 404 || s.Error.Status != "NOT_FOUND" || hdr.Get("Content-Type") != "application/json; charset=UTF-8" {
			t.Fatalf("%s %s: %d %s", tc.method, tc.path, code, b)
		}
	}
}
