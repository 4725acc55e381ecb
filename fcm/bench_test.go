package fcm_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"pushfan/fanout"
	"pushfan/fcm"
)

// BenchmarkSend compares one FCM send through Client, with the firebase
// SDK's Send (sdk) and with the body encoded once per message (direct, the
// default), with the same request made by a bare net/http client
// with a pre-encoded body, against a trivial in-process endpoint that
// answers success at once. All pay the same server and loopback cost, so
// the difference per op is the client-side overhead (message to JSON
// by reflection, request building, response decoding) and its allocations.
// benchDelivery is a bulk broadcast's delivery defaults (docs/fcm.md), so
// that every client of a benchmark sends the bytes pushfan sends.
var benchDelivery = fanout.Delivery{DisplayTag: "pushfan-1", AndroidPriority: "normal", APNSPriority: "5",
	TTL: 28 * 24 * time.Hour, Built: time.Unix(1_800_000_000, 0)}

func BenchmarkSend(b *testing.B) {
	srv := okServer()
	defer srv.Close()
	const conc = 64
	msg := &fanout.Message{Title: "pushfan bench", Body: "one message per token, measured", Delivery: benchDelivery}
	token := "bench-token-000001-abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789"

	for _, client := range []string{fcm.ClientSDK, fcm.ClientDirect} {
		b.Run(client, func(b *testing.B) {
			s, err := fcm.New(context.Background(), fcm.Options{Endpoint: srv.URL + "/v1", ProjectID: "bench", Concurrency: conc, Client: client})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			p, err := s.Prepare(msg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetParallelism(conc / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if out := p.Send(ctx, token, fanout.Budget{Max: 1}); out.Class != fanout.Success {
						b.Error(out)
						return
					}
				}
			})
		})
	}
	b.Run("raw", func(b *testing.B) {
		tr := &http.Transport{MaxIdleConns: conc + 16, MaxIdleConnsPerHost: conc + 16, IdleConnTimeout: 90 * time.Second}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		body := []byte(`{"message":{"token":"` + token + `","notification":{"title":"pushfan bench","body":"one message per token, measured"},` +
			`"android":{"priority":"normal","ttl":"2419200s","notification":{"tag":"pushfan-1"}},` +
			`"webpush":{"headers":{"TTL":"2419200","Urgency":"normal"},"notification":{"tag":"pushfan-1"}},` +
			`"apns":{"headers":{"apns-collapse-id":"pushfan-1","apns-expiration":"1802419200","apns-priority":"5"}}}}`)
		url := srv.URL + "/v1/projects/bench/messages:send"
		b.ReportAllocs()
		b.SetParallelism(conc / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
	})
}

// BenchmarkSendTagged is the direct client's send of a message that
// carries an event token (the engine's Tag: data["pushfan"]) against the
// same message untagged: what tracking costs the client.
func BenchmarkSendTagged(b *testing.B) {
	srv := okServer()
	defer srv.Close()
	const conc = 64
	token := "bench-token-000001-abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789"
	tag := "k1a2b3c4d.AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywtLi8w"
	for _, tagged := range []bool{false, true} {
		msg := &fanout.Message{Title: "pushfan bench", Body: "one message per token, measured", Delivery: benchDelivery}
		if tagged {
			msg.Tagged, msg.Data = true, map[string]string{"pushfan": fanout.TagPlaceholder}
		}
		b.Run(map[bool]string{false: "untagged", true: "tagged"}[tagged], func(b *testing.B) {
			s, err := fcm.New(context.Background(), fcm.Options{Endpoint: srv.URL + "/v1", ProjectID: "bench", Concurrency: conc, Client: fcm.ClientDirect})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			p, err := s.Prepare(msg)
			if err != nil {
				b.Fatal(err)
			}
			tp := p.(fanout.TaggedPrepared)
			b.ReportAllocs()
			b.SetParallelism(conc / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if out := tp.SendTagged(ctx, token, tag, fanout.Budget{Max: 1}); out.Class != fanout.Success {
						b.Error(out)
						return
					}
				}
			})
		})
	}
}

// okServer answers every send with FCM's success body, and nothing else:
// the client's cost alone.
func okServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = io.WriteString(w, `{"name":"projects/bench/messages/1"}`)
	}))
}

// BenchmarkSendTLSHTTP2 compares the direct client's two HTTP/2 clients,
// pushfan's own and net/http's, over TLS + HTTP/2 to an in-process
// endpoint that answers success at once, with 512 sends in flight (a
// connection's 100 streams, several connections). The server runs in the
// same process, so ns/op and CPU include its side; the difference between
// the two is the client's.
func BenchmarkSendTLSHTTP2(b *testing.B) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = io.WriteString(w, `{"name":"projects/bench/messages/1"}`)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(b.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		b.Fatal(err)
	}
	const conc = 512
	msg := &fanout.Message{Title: "pushfan bench", Body: "one message per token, measured", Delivery: benchDelivery}
	token := "bench-token-000001-abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789"
	for _, h2 := range []string{fcm.HTTP2Pushfan, fcm.HTTP2NetHTTP} {
		b.Run(strings.ReplaceAll(h2, "/", ""), func(b *testing.B) {
			s, err := fcm.New(context.Background(), fcm.Options{Endpoint: srv.URL + "/v1", ProjectID: "bench", CAFile: ca, Concurrency: conc, HTTP2: h2})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			p, err := s.Prepare(msg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetParallelism(conc / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if out := p.Send(ctx, token, fanout.Budget{Max: 1}); out.Class != fanout.Success {
						b.Error(out)
						return
					}
				}
			})
		})
	}
}
