package fcmemu_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/messaging"
	"google.golang.org/api/option"

	"pushfan/fcmemu"
)

const project = "demo-project"

// testLogger sends the emulator's logs to the test's output, shown only on failure or -v.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// startEmu runs an emulator behind a real loopback HTTP server, counting its connections.
func startEmu(t testing.TB, cfg fcmemu.Config) (*fcmemu.Emulator, *httptest.Server) {
	t.Helper()
	e := fcmemu.New(cfg, testLogger(t))
	ts := httptest.NewUnstartedServer(e.Handler())
	ts.Config.ConnState = e.ConnState
	ts.Start()
	t.Cleanup(ts.Close)
	return e, ts
}

// sdkClient is the real firebase messaging client pointed at the emulator, exactly as pushfan
// points it (endpoint + no auth + explicit project id).
func sdkClient(t testing.TB, baseURL string, extra ...option.ClientOption) *messaging.Client {
	t.Helper()
	ctx := context.Background()
	opts := append([]option.ClientOption{option.WithEndpoint(baseURL + "/v1"), option.WithoutAuthentication()}, extra...)
	app, err := firebase.NewApp(ctx, &firebase.Config{ProjectID: project}, opts...)
	if err != nil {
		t.Fatalf("firebase.NewApp: %v", err)
	}
	c, err := app.Messaging(ctx)
	if err != nil {
		t.Fatalf("app.Messaging: %v", err)
	}
	return c
}

func msg(token string) *messaging.Message {
	return &messaging.Message{
		Token:        token,
		Notification: &messaging.Notification{Title: "hello", Body: "world"},
		Data:         map[string]string{"k": "v"},
	}
}

func send(t testing.TB, c *messaging.Client, token string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return c.Send(ctx, msg(token))
}

func getJSON(t testing.TB, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decoding: %v", url, err)
	}
}

func stats(t testing.TB, baseURL string) fcmemu.Stats {
	t.Helper()
	var s fcmemu.Stats
	getJSON(t, baseURL+"/emulator/stats", &s)
	return s
}

type countsDoc struct {
	Tokens     map[string]fcmemu.TokenCounts `json:"tokens"`
	TokenCount int                           `json:"token_count"`
}

func tokenCounts(t testing.TB, baseURL, token string) fcmemu.TokenCounts {
	t.Helper()
	var d countsDoc
	getJSON(t, baseURL+"/emulator/counts?token="+token, &d)
	return d.Tokens[token]
}

// do sends a raw request and returns status, headers and body.
func do(t testing.TB, method, url, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func putConfig(t testing.TB, baseURL, body string) {
	t.Helper()
	code, _, b := do(t, http.MethodPut, baseURL+"/emulator/config", body)
	if code != http.StatusOK {
		t.Fatalf("PUT /emulator/config %s: %d %s", body, code, b)
	}
}

// rpcStatus is the google.rpc.Status error body, decoded generically for shape assertions.
type rpcStatus struct {
	Error struct {
		Code    int              `json:"code"`
		Message string           `json:"message"`
		Status  string           `json:"status"`
		Details []map[string]any `json:"details"`
	} `json:"error"`
}

func decodeStatus(t testing.TB, b []byte) rpcStatus {
	t.Helper()
	var s rpcStatus
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("decoding google.rpc.Status %s: %v", b, err)
	}
	return s
}

// detail returns the first detail of type typ.
func (s rpcStatus) detail(typ string) map[string]any {
	for _, d := range s.Error.Details {
		if d["@type"] == typ {
			return d
		}
	}
	return nil
}

// waitFor polls cond until it holds or a generous deadline passes: for effects the client cannot
// observe directly (a handler noticing its client left).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// receive waits for a value (or the close) of ch, failing the test after a generous deadline with
// what it was waiting for: a Serve or Main that does not return, a client that does not give up.
func receive[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	const within = 30 * time.Second
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", within, what)
		var zero T
		return zero
	}
}
