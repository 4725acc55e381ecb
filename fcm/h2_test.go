package fcm

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/fanout"
	"pushfan/fcm/transport"
	"pushfan/fcmemu"
)

// The HTTP/1.1 and HTTP/2 clients' own tests (connections, flow control,
// GOAWAY, timeouts, Close) are fcm/transport's; these check what fcm makes
// of them.

// tlsEmulator serves h over TLS (HTTP/2 when h2) and returns the server,
// a CA file that trusts it, and the count of connections it accepted.
func tlsEmulator(t *testing.T, h http.Handler, h2 bool) (*httptest.Server, string, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = h2
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, ca, &conns
}

// h2Client is a direct Client over pushfan's HTTP/2 client to srv.
func h2Client(t *testing.T, base, ca string, conc int) *Client {
	t.Helper()
	c, err := New(context.Background(), Options{Endpoint: base + "/v1", ProjectID: "h2", CAFile: ca, Concurrency: conc})
	if err != nil {
		t.Fatal(err)
	}
	if c.direct == nil || c.direct.tr.Carrier() != "h2" {
		t.Fatal("the direct client has no HTTP/2 client")
	}
	t.Cleanup(c.Close)
	return c
}

// Over TLS + HTTP/2, pushfan's HTTP/2 client sends the SDK's request byte
// for byte with the SDK's headers, and every answer the emulator can give
// classifies as the SDK's does over net/http.
func TestH2ClientMatchesTheSDK(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	rb := &recordBodies{h: emu.Handler(), bodies: map[string][]byte{}, header: map[string]http.Header{}}
	srv, ca, _ := tlsEmulator(t, rb, true)
	sdk, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1", ProjectID: "h2", CAFile: ca, Concurrency: 4, Client: ClientSDK})
	if err != nil {
		t.Fatal(err)
	}
	defer sdk.Close()
	direct := h2Client(t, srv.URL, ca, 4)

	plain := &fanout.Message{Title: "Hi \"you\" <b>&</b>", Body: "ünïcødé ✓", Data: map[string]string{"k": "v"}, Delivery: fanout.Delivery{DisplayTag: "pushfan-7"}}
	reserved := &fanout.Message{Body: "x", Data: map[string]string{"from": "nope"}}
	dry := &fanout.Message{Body: "dry", DryRun: true, Platform: samplePlatform()}
	cases := []struct {
		msg   *fanout.Message
		token string
	}{
		{plain, "ok-1"}, {dry, "ok-2"}, {plain, "unregistered-1"}, {plain, "mismatch-1"}, {plain, "invalid-1"},
		{reserved, "ok-3"}, {plain, "quota-1"}, {plain, "unavailable-1"}, {plain, "internal-1"}, {plain, "auth-1"},
		{plain, "ok-\"quoted\"-<tag>&"},
	}
	for _, tc := range cases {
		s := send(t, sdk, tc.msg, tc.token, fanout.Budget{Max: 1})
		sb, sh := rb.take(tc.token)
		d := send(t, direct, tc.msg, tc.token, fanout.Budget{Max: 1})
		db, dh := rb.take(tc.token)
		if d.Class != s.Class || d.Code != s.Code || d.RetryAfter != s.RetryAfter || d.Requests != 1 {
			t.Fatalf("%s: h2 %+v, SDK %+v", tc.token, d, s)
		}
		if (d.MessageID != "") != (s.Class == fanout.Success) || (s.Class == fanout.Success && !strings.HasPrefix(d.MessageID, "projects/h2/messages/")) {
			t.Fatalf("%s: message id %q for %v", tc.token, d.MessageID, d.Class)
		}
		if len(sb) == 0 || !bytes.Equal(sb, db) {
			t.Fatalf("%s: bodies differ:\n sdk: %s\n h2:  %s", tc.token, sb, db)
		}
		for _, k := range []string{"Content-Type", "X-Goog-Api-Format-Version", "X-Firebase-Client", "X-Goog-Api-Client", "User-Agent", "Content-Length"} {
			if sh.Get(k) == "" || sh.Get(k) != dh.Get(k) {
				t.Fatalf("%s: header %s: sdk %q, h2 %q", tc.token, k, sh.Get(k), dh.Get(k))
			}
		}
	}
	// One dial for them all: fcm/transport's
	// TestH2ClientSendsSequentialRequestsOnOneConnection.
}

// The transport's Results classify as net/http's answers did: an error
// with the send's context ended is a timeout, any other a network error,
// a request that could not be built is Fatal, a 2xx is a success with
// FCM's message id, and anything else is FCM's answer.
func TestOutcomeOfTheTransportsResults(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name  string
		ctx   context.Context
		r     transport.Result
		class fanout.Class
		code  string
	}{
		{"network", live, transport.Result{Err: errors.New("reset")}, fanout.Transient, CodeNetwork},
		{"timeout", ended, transport.Result{Err: errors.New("deadline")}, fanout.Transient, fanout.CodeTimeout},
		{"bad request", live, transport.Result{Err: &transport.RequestError{Err: errors.New("bad URL")}}, fanout.Fatal, CodeUnknown},
		{"success", live, transport.Result{Status: 200, Body: []byte(`{"name":"projects/p/messages/1"}`)}, fanout.Success, ""},
		{"unavailable", live, transport.Result{Status: 503, Header: http.Header{"Retry-After": {"7"}},
			Body: []byte(`{"error":{"code":503,"message":"later","status":"UNAVAILABLE","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNAVAILABLE"}]}}`)},
			fanout.Transient, CodeUnavailable},
	}
	for _, tc := range cases {
		out := outcome(tc.ctx, tc.r)
		if out.Class != tc.class || out.Code != tc.code || out.Requests != 1 {
			t.Errorf("%s: %+v, want %v/%s", tc.name, out, tc.class, tc.code)
		}
		if tc.r.Err != nil && out.Detail != tc.r.Err.Error() {
			t.Errorf("%s: detail %q, want the error's %q", tc.name, out.Detail, tc.r.Err.Error())
		}
	}
	if out := outcome(live, cases[3].r); out.MessageID != "projects/p/messages/1" {
		t.Errorf("success: message id %q", out.MessageID)
	}
	want := classifyResponse(503, cases[4].r.Header, cases[4].r.Body)
	want.Requests = 1
	if out := outcome(live, cases[4].r); out != want || out.RetryAfter != 7*time.Second || out.Detail != "later" {
		t.Errorf("unavailable: %+v, classifyResponse says %+v", out, want)
	}
}
