package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/messaging"
	"google.golang.org/api/option"
)

// baselineRun is one baseline: the raw net/http probe or an SDK pattern.
type baselineRun struct {
	Name        string  `json:"name"`
	N           int     `json:"n"`
	Concurrency int     `json:"concurrency"`
	WallSeconds float64 `json:"wall_seconds"`
	SendsPerS   float64 `json:"sends_per_s"`
	OK          int64   `json:"ok"`
	Errors      int64   `json:"errors"`
	// Driver CPU (getrusage) per send; meaningful for the raw probe, which
	// runs with nothing else working in the driver.
	CPUMicrosPerMsg   float64 `json:"cpu_us_per_send"`
	LatencyP50MS      float64 `json:"latency_p50_ms,omitempty"`
	LatencyP95MS      float64 `json:"latency_p95_ms,omitempty"`
	LatencyP99MS      float64 `json:"latency_p99_ms,omitempty"`
	EmuRequests       int64   `json:"emu_requests"`
	EmuCPUMicrosPerRq float64 `json:"emu_cpu_us_per_request"`
	EmuConnections    int64   `json:"emu_connections_accepted"`
	EmuMaxInFlight    int64   `json:"emu_max_in_flight"`
}

// wireBodies are what pushfan's SDK call puts on the wire for each token
// (the notification plus a bulk broadcast's delivery defaults, as
// benchMessage has them), pre-encoded for the raw probe.
func wireBodies(tokens []string) ([][]byte, error) {
	out := make([][]byte, len(tokens))
	for i, t := range tokens {
		b, err := json.Marshal(map[string]any{"message": benchMessage(t)})
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// benchMessage is the message every client of the comparison sends: what
// pushfan sends for a bulk broadcast (docs/fcm.md: the display tag, normal
// priority, four weeks), so that each pays for the same bytes.
func benchMessage(token string) *messaging.Message {
	ttl := 28 * 24 * time.Hour
	return &messaging.Message{
		Token:        token,
		Notification: &messaging.Notification{Title: "pushfan bench", Body: "one message per token, measured"},
		Android: &messaging.AndroidConfig{Priority: "normal", TTL: &ttl,
			Notification: &messaging.AndroidNotification{Tag: "pushfan-bench"}},
		APNS: &messaging.APNSConfig{Headers: map[string]string{"apns-collapse-id": "pushfan-bench", "apns-priority": "5",
			"apns-expiration": "1800000000"}},
		Webpush: &messaging.WebpushConfig{Headers: map[string]string{"TTL": "2419200", "Urgency": "normal"},
			Notification: &messaging.WebpushNotification{Tag: "pushfan-bench"}},
	}
}

// measureEmu wraps fn with emulator stats before and after.
func measureEmu(ctx context.Context, emu *emulator, r *baselineRun, fn func() error) error {
	if err := emu.reset(ctx); err != nil {
		return err
	}
	s0, err := emu.stats(ctx)
	if err != nil {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	s1, err := emu.stats(ctx)
	if err != nil {
		return err
	}
	r.EmuRequests = s1.Requests - s0.Requests
	if r.EmuRequests > 0 {
		r.EmuCPUMicrosPerRq = (s1.CPUSeconds - s0.CPUSeconds) * 1e6 / float64(r.EmuRequests)
	}
	r.EmuConnections = s1.ConnectionsAccepted - s0.ConnectionsAccepted
	r.EmuMaxInFlight = s1.MaxInFlight
	return nil
}

// rawProbe sends one pre-encoded request per body over net/http with conc
// goroutines pulling from a shared index: the cheapest client this box can
// run, hence the physical limit pushfan is compared with. The driver does
// nothing else meanwhile, so its getrusage delta is the probe's CPU.
func rawProbe(ctx context.Context, emu *emulator, bodies [][]byte, conc int) (*baselineRun, error) {
	tr, err := clientTransport(emu.mode, emu.caFile, conc)
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	url := emu.endpoint + "/projects/" + benchProject + "/messages:send"
	r := &baselineRun{Name: "raw net/http probe", N: len(bodies), Concurrency: conc}
	lat := make([]time.Duration, len(bodies))
	err = measureEmu(ctx, emu, r, func() error {
		var next, ok, bad atomic.Int64
		runtime.GC()
		cpu0 := selfCPU()
		t0 := time.Now()
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				for ctx.Err() == nil {
					i := next.Add(1) - 1
					if i >= int64(len(bodies)) {
						return
					}
					start := time.Now()
					req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(bodies[i]))
					if err != nil {
						bad.Add(1)
						continue
					}
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						bad.Add(1)
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						bad.Add(1)
						continue
					}
					lat[i] = time.Since(start)
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		wall := time.Since(t0)
		cpu := selfCPU() - cpu0
		r.WallSeconds = wall.Seconds()
		r.OK, r.Errors = ok.Load(), bad.Load()
		r.SendsPerS = float64(r.OK) / wall.Seconds()
		if n := r.OK + r.Errors; n > 0 {
			r.CPUMicrosPerMsg = float64(cpu.Microseconds()) / float64(n)
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	r.LatencyP50MS, r.LatencyP95MS, r.LatencyP99MS = exactPercentiles(lat)
	return r, nil
}

// sdkClient is the firebase SDK pointed at the emulator, as an application
// would set it up: the SDK's own transport over HTTP/1.1, or one speaking
// h2c / trusting the emulator's CA.
func sdkClient(ctx context.Context, emu *emulator) (*messaging.Client, error) {
	opts := []option.ClientOption{option.WithEndpoint(emu.endpoint), option.WithoutAuthentication()}
	if emu.mode != "http1" {
		tr, err := clientTransport(emu.mode, emu.caFile, 100)
		if err != nil {
			return nil, err
		}
		opts = append(opts, option.WithHTTPClient(&http.Client{Transport: tr}))
	}
	app, err := firebase.NewApp(ctx, &firebase.Config{ProjectID: benchProject}, opts...)
	if err != nil {
		return nil, fmt.Errorf("firebase app: %w", err)
	}
	return app.Messaging(ctx)
}

// sequentialSDK is the slow first version of the feature: one blocking
// client.Send after the other.
func sequentialSDK(ctx context.Context, emu *emulator, tokens []string) (*baselineRun, error) {
	client, err := sdkClient(ctx, emu)
	if err != nil {
		return nil, err
	}
	r := &baselineRun{Name: "SDK sequential Send", N: len(tokens), Concurrency: 1}
	lat := make([]time.Duration, len(tokens))
	err = measureEmu(ctx, emu, r, func() error {
		cpu0 := selfCPU()
		t0 := time.Now()
		for i, tok := range tokens {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			start := time.Now()
			if _, err := client.Send(ctx, benchMessage(tok)); err != nil {
				r.Errors++
				continue
			}
			lat[i] = time.Since(start)
			r.OK++
		}
		r.WallSeconds = time.Since(t0).Seconds()
		r.SendsPerS = float64(r.OK) / r.WallSeconds
		r.CPUMicrosPerMsg = float64((selfCPU() - cpu0).Microseconds()) / float64(max(1, r.OK+r.Errors))
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.LatencyP50MS, r.LatencyP95MS, r.LatencyP99MS = exactPercentiles(lat)
	return r, nil
}

// multicastSDK is the "batch" version: SendEachForMulticast on 500 tokens
// at a time (the SDK fans each call out to 50 goroutines and waits for all).
func multicastSDK(ctx context.Context, emu *emulator, tokens []string) (*baselineRun, error) {
	client, err := sdkClient(ctx, emu)
	if err != nil {
		return nil, err
	}
	r := &baselineRun{Name: "SDK SendEachForMulticast x500", N: len(tokens), Concurrency: 50}
	err = measureEmu(ctx, emu, r, func() error {
		cpu0 := selfCPU()
		t0 := time.Now()
		for lo := 0; lo < len(tokens); lo += 500 {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			batch := tokens[lo:min(lo+500, len(tokens))]
			m := benchMessage("")
			resp, err := client.SendEachForMulticast(ctx, &messaging.MulticastMessage{
				Tokens: batch, Notification: m.Notification, Android: m.Android, APNS: m.APNS, Webpush: m.Webpush,
			})
			if err != nil {
				r.Errors += int64(len(batch))
				continue
			}
			r.OK += int64(resp.SuccessCount)
			r.Errors += int64(resp.FailureCount)
		}
		r.WallSeconds = time.Since(t0).Seconds()
		r.SendsPerS = float64(r.OK) / r.WallSeconds
		r.CPUMicrosPerMsg = float64((selfCPU() - cpu0).Microseconds()) / float64(max(1, r.OK+r.Errors))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}
