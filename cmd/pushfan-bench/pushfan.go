package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"pushfan/internal/devtools/apiclient"
)

const (
	adminToken   = "pushfan-bench-admin-token-0123456789"
	latencyHist  = "pushfan_fcm_send_duration_seconds"
	benchProject = "pushfan-bench"
)

// service is a running `pushfan serve`.
type service struct {
	p    *proc
	base string
	http *http.Client
	db   benchDB
}

// dsn is the database the service runs on.
func (s *service) dsn() string { return s.db.dsn }

type serviceSpec struct {
	db          benchDB
	concurrency int    // 0 keeps pushfan's default
	rateLimit   string // "" keeps pushfan's default
	extraEnv    []string
}

func startService(ctx context.Context, bin, dir, name string, emu *emulator, spec serviceSpec) (*service, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(),
		"PUSHFAN_MYSQL_DSN="+spec.db.dsn,
		"PUSHFAN_HTTP_ADDR="+addr,
		"PUSHFAN_FCM_ENDPOINT="+emu.endpoint,
		"PUSHFAN_FCM_PROJECT_ID="+benchProject,
		"PUSHFAN_ADMIN_TOKENS="+adminToken,
		"PUSHFAN_LOG_LEVEL=warn",
	)
	if spec.concurrency > 0 {
		env = append(env, fmt.Sprintf("PUSHFAN_CONCURRENCY=%d", spec.concurrency))
	}
	if spec.rateLimit != "" {
		env = append(env, "PUSHFAN_RATE_LIMIT="+spec.rateLimit)
	}
	switch emu.mode {
	case "h2c":
		env = append(env, "PUSHFAN_FCM_H2C=true")
	case "tls":
		env = append(env, "PUSHFAN_FCM_CA_FILE="+emu.caFile)
	}
	env = append(env, spec.extraEnv...)
	p, err := startProc(name, dir, bin, []string{"serve"}, env, nil)
	if err != nil {
		return nil, err
	}
	s := &service{p: p, base: "http://" + addr, http: &http.Client{Timeout: 30 * time.Second}, db: spec.db}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := s.http.Get(s.base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if p.exited() {
			return nil, fmt.Errorf("pushfan serve exited before ready: %v\n%s", p.exitErr, p.tail(30))
		}
		if time.Now().After(deadline) {
			p.stop(10 * time.Second)
			return nil, fmt.Errorf("pushfan serve not ready after 60s\n%s", p.tail(30))
		}
		select {
		case <-ctx.Done():
			p.stop(10 * time.Second)
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *service) stop() { s.p.stop(20 * time.Second) }

// broadcastView is the API's broadcast object as this client reads it.
type broadcastView = apiclient.Broadcast

func (s *service) call(ctx context.Context, method, path string, body []byte) (broadcastView, error) {
	var v broadcastView
	err := s.callInto(ctx, method, path, body, &v)
	return v, err
}

// postJSONWithin posts body to path and decodes the answer into out,
// waiting up to within for it (a count over 10M tokens takes longer than
// the client's 30 s).
func (s *service) postJSONWithin(ctx context.Context, within time.Duration, path string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	c := *s.http
	c.Timeout = within
	return s.callWith(ctx, &c, http.MethodPost, path, raw, out)
}

// callInto makes one admin API call and decodes a 2xx answer into v.
func (s *service) callInto(ctx context.Context, method, path string, body []byte, v any) error {
	return s.callWith(ctx, s.http, method, path, body, v)
}

func (s *service) callWith(ctx context.Context, client *http.Client, method, path string, body []byte, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// scrapeLatency reads the send-latency histogram from GET /metrics; ok is
// false when pushfan does not expose it.
func (s *service) scrapeLatency(ctx context.Context) (histogram, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/metrics", nil)
	if err != nil {
		return histogram{}, false
	}
	req.Header.Set("Authorization", "Bearer "+adminToken) // /metrics is not public
	resp, err := s.http.Do(req)
	if err != nil {
		return histogram{}, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return histogram{}, false
	}
	h, ok, err := parseHistogram(resp.Body, latencyHist)
	if err != nil || !ok {
		return histogram{}, false
	}
	return h, true
}

// pushfanRun is one broadcast through the API, measured.
type pushfanRun struct {
	Label       string `json:"label,omitempty"`
	N           int    `json:"n"`
	Concurrency int    `json:"concurrency"`
	Mode        string `json:"mode"`
	RateLimit   string `json:"rate_limit"`
	// EmuLatency is the emulator's latency per send (the latency sweep).
	EmuLatency  string  `json:"emulator_latency,omitempty"`
	BroadcastID uint64  `json:"broadcast_id"`
	Status      string  `json:"status"`
	WallSeconds float64 `json:"wall_seconds"` // POST sent → finished_at
	// DurationMS is pushfan's own started_at → finished_at.
	DurationMS int64   `json:"duration_ms"`
	SendsPerS  float64 `json:"sends_per_s"` // succeeded / wall
	// SustainedPerS is the emulator's accepted rate between 10% and 90%
	// of the audience (1 s samples): the steady state without start-up and
	// tail.
	SustainedPerS float64          `json:"sustained_per_s"`
	Targeted      int64            `json:"targeted"`
	Succeeded     int64            `json:"succeeded"`
	Failed        int64            `json:"failed"`
	Canceled      int64            `json:"canceled"`
	Errors        map[string]int64 `json:"errors,omitempty"`
	// Send latency from pushfan's histogram (ms); nil when /metrics does
	// not expose it.
	LatencyP50MS *float64 `json:"latency_p50_ms"`
	LatencyP95MS *float64 `json:"latency_p95_ms"`
	LatencyP99MS *float64 `json:"latency_p99_ms"`
	// Service CPU (utime+stime of the serve process) over the broadcast.
	CPUSeconds      float64 `json:"cpu_seconds"`
	CPUMicrosPerMsg float64 `json:"cpu_us_per_send"`
	PeakRSSMB       float64 `json:"peak_rss_mb"` // VmHWM of the serve process
	// What the emulator saw during the broadcast.
	EmuRequests       int64            `json:"emu_requests"`
	EmuAccepted       int64            `json:"emu_accepted"`
	EmuByCode         map[string]int64 `json:"emu_by_code"`
	EmuCPUMicrosPerRq float64          `json:"emu_cpu_us_per_request"`
	EmuConnections    int64            `json:"emu_connections_accepted"`
	EmuMaxInFlight    int64            `json:"emu_max_in_flight"`
	EmuDuringBackoff  int64            `json:"emu_requests_during_backoff"`
	Tally             *tokenTally      `json:"token_tally,omitempty"`
	Missing           int64            `json:"missing"` // audience tokens never accepted
	// Samples is the emulator's accepted count about every second.
	Samples []sample `json:"accepted_samples,omitempty"`
}

// sample is the emulator's accepted count at AtMS after the POST.
type sample struct {
	AtMS        int64 `json:"at_ms"`
	Accepted    int64 `json:"accepted"`
	Connections int64 `json:"connections_accepted"`
	Open        int64 `json:"connections_open"`
}

type broadcastSpec struct {
	label      string
	n          int
	conc       int
	rateLimit  string
	tally      bool // stream per-token counts afterwards (exact lost/duplicate check)
	logf       func(string, ...any)
	sampleRate bool
	body       []byte // the POST /push/broadcast body; nil: trackedBody
}

// runBroadcast resets the emulator, submits one "all" broadcast with
// ?wait=0, polls it every 100 ms until final, and measures it.
func runBroadcast(ctx context.Context, svc *service, emu *emulator, spec broadcastSpec) (*pushfanRun, error) {
	if err := emu.reset(ctx); err != nil {
		return nil, err
	}
	st0, err := emu.stats(ctx)
	if err != nil {
		return nil, err
	}
	hist0, haveHist := svc.scrapeLatency(ctx)
	cpu0, err := procCPU(svc.p.pid())
	if err != nil {
		return nil, err
	}
	body := spec.body
	if body == nil {
		body = trackedBody
	}
	t0 := time.Now()
	v, err := svc.call(ctx, http.MethodPost, "/push/broadcast?wait=0", body)
	if err != nil {
		return nil, err
	}
	r := &pushfanRun{Label: spec.label, N: spec.n, Concurrency: spec.conc, Mode: emu.mode, RateLimit: spec.rateLimit, BroadcastID: v.ID}
	if r.RateLimit == "" {
		r.RateLimit = "default"
	}
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	nextSample := t0.Add(time.Second)
	lastLog := t0
	for !v.Final() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-poll.C:
		}
		if svc.p.exited() {
			return nil, fmt.Errorf("pushfan serve exited during the broadcast: %v\n%s", svc.p.exitErr, svc.p.tail(30))
		}
		if v, err = svc.call(ctx, http.MethodGet, fmt.Sprintf("/push/broadcasts/%d", v.ID), nil); err != nil {
			return nil, err
		}
		if now := time.Now(); spec.sampleRate && !now.Before(nextSample) {
			if s, err := emu.stats(ctx); err == nil {
				r.Samples = append(r.Samples, sample{AtMS: now.Sub(t0).Milliseconds(), Accepted: s.Accepted,
					Connections: s.ConnectionsAccepted, Open: s.ConnectionsOpen})
			}
			nextSample = nextSample.Add(time.Second)
			if spec.logf != nil && now.Sub(lastLog) >= 10*time.Second {
				spec.logf("  … %s: %d/%d sent after %.0fs", spec.label, v.Succeeded+v.Failed, spec.n, now.Sub(t0).Seconds())
				lastLog = now
			}
		}
	}
	observedEnd := time.Now()
	cpu1, err := procCPU(svc.p.pid())
	if err != nil {
		return nil, err
	}
	hwm, err := procStatusKB(svc.p.pid(), "VmHWM")
	if err != nil {
		return nil, err
	}
	hist1, haveHist1 := svc.scrapeLatency(ctx)
	st1, err := emu.stats(ctx)
	if err != nil {
		return nil, err
	}

	r.Status = v.Status
	r.Targeted, r.Succeeded, r.Failed, r.Canceled, r.Errors = v.Targeted, v.Succeeded, v.Failed, v.Canceled, v.Errors
	end := observedEnd
	if v.FinishedAt != nil {
		end = *v.FinishedAt
	}
	r.WallSeconds = end.Sub(t0).Seconds()
	if v.DurationMS != nil {
		r.DurationMS = *v.DurationMS
	}
	if r.WallSeconds > 0 {
		r.SendsPerS = float64(r.Succeeded) / r.WallSeconds
	}
	r.SustainedPerS = sustained(r.Samples, spec.n)
	r.CPUSeconds = (cpu1 - cpu0).Seconds()
	if r.Succeeded+r.Failed > 0 {
		r.CPUMicrosPerMsg = r.CPUSeconds * 1e6 / float64(r.Succeeded+r.Failed)
	}
	r.PeakRSSMB = float64(hwm) / 1024
	r.EmuRequests = st1.Requests - st0.Requests
	r.EmuAccepted = st1.Accepted - st0.Accepted
	r.EmuByCode = st1.ByCode
	if r.EmuRequests > 0 {
		r.EmuCPUMicrosPerRq = (st1.CPUSeconds - st0.CPUSeconds) * 1e6 / float64(r.EmuRequests)
	}
	r.EmuConnections = st1.ConnectionsAccepted - st0.ConnectionsAccepted
	r.EmuMaxInFlight = st1.MaxInFlight
	r.EmuDuringBackoff = st1.RequestsDuringBack - st0.RequestsDuringBack
	if haveHist && haveHist1 {
		d := hist1.sub(hist0)
		if d.count() > 0 {
			p50, p95, p99 := d.quantile(0.5)*1000, d.quantile(0.95)*1000, d.quantile(0.99)*1000
			r.LatencyP50MS, r.LatencyP95MS, r.LatencyP99MS = &p50, &p95, &p99
		}
	}
	r.Missing = int64(spec.n) - r.EmuAccepted
	if spec.tally {
		t, err := emu.tally(ctx)
		if err != nil {
			return r, err
		}
		r.Tally = &t
		r.Missing = int64(spec.n) - t.Delivered
	}
	if r.Status != "completed" {
		return r, fmt.Errorf("broadcast %d ended %s (succeeded %d, failed %d, canceled %d)", r.BroadcastID, r.Status, r.Succeeded, r.Failed, r.Canceled)
	}
	return r, nil
}

// sustained is the accepted rate between the first samples at which 10%
// and 90% of n had been accepted; 0 when the run was too short to tell.
func sustained(samples []sample, n int) float64 {
	lo, hi := -1, -1
	for i, s := range samples {
		if lo < 0 && s.Accepted >= int64(n)/10 {
			lo = i
		}
		if s.Accepted >= int64(n)*9/10 {
			hi = i
			break
		}
	}
	if lo < 0 || hi <= lo || samples[hi].AtMS <= samples[lo].AtMS {
		return 0
	}
	return float64(samples[hi].Accepted-samples[lo].Accepted) * 1000 / float64(samples[hi].AtMS-samples[lo].AtMS)
}
