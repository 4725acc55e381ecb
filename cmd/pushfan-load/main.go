// Command pushfan-load is the driver of scripts/load.sh: it measures a
// broadcast's throughput alone (run A), then again while K goroutines hammer
// the read API (run B), and reports the API latency per route and the
// throughput drop. It talks to a pushfan server and an FCM emulator that
// load.sh started on loopback, and it is bounded: a request cap, a time cap
// on the hammering, and a deadline on each broadcast.
//
//	PUSHFAN_LOAD_TOKEN=<admin token> pushfan-load -api http://127.0.0.1:18280 \
//	  -emulator http://127.0.0.1:19299 -expect 100000 -out bench-results/load-X.json
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"pushfan/internal/devtools/apiclient"
)

type options struct {
	api, emulator    string
	token            string
	workers          int
	maxRequests      int64
	maxTime          time.Duration
	broadcastTimeout time.Duration
	expect           int64
	out              string
	p99Target        time.Duration
	dropTarget       float64
	bracket          bool
	apiAlone         time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.api, "api", "http://127.0.0.1:18280", "pushfan base URL (loopback only)")
	flag.StringVar(&o.emulator, "emulator", "http://127.0.0.1:19299", "FCM emulator base URL (loopback only)")
	flag.IntVar(&o.workers, "workers", 32, "goroutines hammering the read API in run B")
	flag.Int64Var(&o.maxRequests, "max-requests", 2_000_000, "cap on API requests in run B")
	flag.DurationVar(&o.maxTime, "max-time", 5*time.Minute, "cap on the hammering time in run B")
	flag.DurationVar(&o.broadcastTimeout, "broadcast-timeout", 10*time.Minute, "deadline of each broadcast")
	flag.Int64Var(&o.expect, "expect", 0, "expected targeted count of each broadcast (0: do not check)")
	flag.StringVar(&o.out, "out", "", "write the JSON report to this file")
	flag.DurationVar(&o.p99Target, "p99-target", 50*time.Millisecond, "API p99 target")
	flag.Float64Var(&o.dropTarget, "drop-target", 10, "broadcast throughput drop target, in %")
	flag.DurationVar(&o.apiAlone, "api-alone", 10*time.Second, "after run A, hammer the API this long with no broadcast running, as a control for run B's latencies (0: skip)")
	flag.BoolVar(&o.bracket, "bracket", true, "run a second no-load broadcast after run B (run C) and compare B with the mean of A and C, so drift on a shared machine does not pass for the load's effect")
	flag.Parse()
	o.token = os.Getenv("PUSHFAN_LOAD_TOKEN") // not a flag: flags show in ps
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pushfan-load:", err)
		os.Exit(1)
	}
}

// Report is the JSON written to -out.
type Report struct {
	StartedAt time.Time      `json:"started_at"`
	Host      HostInfo       `json:"host"`
	Settings  map[string]any `json:"settings"`
	RunA      BroadcastRun   `json:"run_a_no_load"`
	RunB      BroadcastRun   `json:"run_b_under_load"`
	RunC      *BroadcastRun  `json:"run_c_no_load_after,omitempty"`
	// BaselineTokensPerSec is run A's throughput, or the mean of A and C
	// with -bracket.
	BaselineTokensPerSec float64    `json:"baseline_tokens_per_sec"`
	Load                 LoadResult `json:"api_load"`
	// LoadAlone is the same hammering with no broadcast running (-api-alone).
	LoadAlone   *LoadResult         `json:"api_load_no_broadcast,omitempty"`
	DropPercent float64             `json:"throughput_drop_percent"`
	Targets     map[string]Verdict  `json:"targets"`
	Emulator    map[string]EmuStats `json:"emulator"`
}

type HostInfo struct {
	CPUs        int    `json:"cpus"`
	GoVersion   string `json:"go_version"`
	LoadAvgPre  string `json:"loadavg_before"`
	LoadAvgPost string `json:"loadavg_after"`
}

type Verdict struct {
	Target string `json:"target"`
	Value  string `json:"value"`
	Met    bool   `json:"met"`
}

// BroadcastRun is one 100k broadcast as the server reports it.
type BroadcastRun struct {
	ID            uint64           `json:"id"`
	Status        string           `json:"status"`
	Targeted      int64            `json:"targeted"`
	Succeeded     int64            `json:"succeeded"`
	Failed        int64            `json:"failed"`
	Canceled      int64            `json:"canceled"`
	Errors        map[string]int64 `json:"errors"`
	StartedAt     *time.Time       `json:"started_at"`
	FinishedAt    *time.Time       `json:"finished_at"`
	SendSeconds   float64          `json:"send_seconds"`   // finished_at - started_at
	TokensPerSec  float64          `json:"tokens_per_sec"` // targeted / send_seconds
	SubmitToFinal float64          `json:"submit_to_final_seconds"`
	// Resources used between submit and the final state, from the server's
	// /metrics (process CPU, database pool waits), the emulator's stats and
	// this driver's own rusage; absent when /metrics is not served.
	Resources map[string]float64 `json:"resources,omitempty"`
}

type LoadResult struct {
	Workers        int                    `json:"workers"`
	Requests       int64                  `json:"requests"`
	Errors         int64                  `json:"errors"`
	Seconds        float64                `json:"seconds"`
	RequestsPerSec float64                `json:"requests_per_sec"`
	StoppedBy      string                 `json:"stopped_by"` // broadcast_finished | max_requests | max_time
	Routes         map[string]RouteResult `json:"routes"`
}

type RouteResult struct {
	Requests       int64            `json:"requests"`
	Errors         int64            `json:"errors"`
	ErrorsByKind   map[string]int64 `json:"errors_by_kind,omitempty"`
	RequestsPerSec float64          `json:"requests_per_sec"`
	P50MS          float64          `json:"p50_ms"`
	P90MS          float64          `json:"p90_ms"`
	P99MS          float64          `json:"p99_ms"`
	P999MS         float64          `json:"p999_ms"`
	MaxMS          float64          `json:"max_ms"`
	MeanMS         float64          `json:"mean_ms"`
}

type EmuStats struct {
	CPUSeconds float64          `json:"cpu_seconds"`
	Requests   int64            `json:"requests"`
	Accepted   int64            `json:"accepted"`
	ByCode     map[string]int64 `json:"by_code"`
}

func run(ctx context.Context, o options, stdout io.Writer) error {
	for _, u := range []string{o.api, o.emulator} {
		if err := loopbackOnly(u); err != nil {
			return err
		}
	}
	if o.token == "" {
		return errors.New("PUSHFAN_LOAD_TOKEN must hold an admin token with the sender role")
	}
	c := &client{
		api: strings.TrimRight(o.api, "/"), emu: strings.TrimRight(o.emulator, "/"), token: o.token,
		http: &http.Client{
			Timeout: 30 * time.Second,
			Transport: &http.Transport{
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
				MaxIdleConns:        o.workers + 8,
				MaxIdleConnsPerHost: o.workers + 8,
				IdleConnTimeout:     time.Minute,
			},
		},
	}
	rep := Report{
		StartedAt: time.Now().UTC(),
		Host:      HostInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAvgPre: loadavg()},
		Settings: map[string]any{
			"workers": o.workers, "max_requests": o.maxRequests, "max_time": o.maxTime.String(),
			"api": o.api, "emulator": o.emulator, "expect": o.expect,
		},
		Emulator: map[string]EmuStats{},
	}

	fmt.Fprintf(stdout, "run A: one broadcast, no API load\n")
	if err := c.resetEmulator(ctx); err != nil {
		return err
	}
	a, err := c.broadcastAndWait(ctx, "load test A (no API load)", o.broadcastTimeout, nil)
	if err != nil {
		return fmt.Errorf("run A: %w", err)
	}
	rep.RunA = a
	rep.Emulator["run_a"], _ = c.emulatorStats(ctx)
	fmt.Fprintf(stdout, "  broadcast %d %s: %d targeted in %.2fs = %.0f tokens/s\n", a.ID, a.Status, a.Targeted, a.SendSeconds, a.TokensPerSec)

	if o.apiAlone > 0 {
		fmt.Fprintf(stdout, "control: %d goroutines hammer the API for %v with no broadcast running\n", o.workers, o.apiAlone)
		stopAlone := make(chan struct{})
		t := time.AfterFunc(o.apiAlone, func() { close(stopAlone) })
		alone := hammer(ctx, c, o, a.ID, stopAlone)
		t.Stop()
		if alone.StoppedBy == "broadcast_finished" {
			alone.StoppedBy = "api_alone_elapsed"
		}
		rep.LoadAlone = &alone
	}

	fmt.Fprintf(stdout, "run B: the same audience while %d goroutines hammer GET /push/broadcasts/{id} and GET /push/stats\n", o.workers)
	if err := c.resetEmulator(ctx); err != nil {
		return err
	}
	var load LoadResult
	b, err := c.broadcastAndWait(ctx, "load test B (under API load)", o.broadcastTimeout, func(id uint64, finished <-chan struct{}) {
		load = hammer(ctx, c, o, id, finished)
	})
	if err != nil {
		return fmt.Errorf("run B: %w", err)
	}
	rep.RunB, rep.Load = b, load
	rep.Emulator["run_b"], _ = c.emulatorStats(ctx)
	fmt.Fprintf(stdout, "  broadcast %d %s: %d targeted in %.2fs = %.0f tokens/s\n", b.ID, b.Status, b.Targeted, b.SendSeconds, b.TokensPerSec)

	runs := []BroadcastRun{a, b}
	rep.BaselineTokensPerSec = a.TokensPerSec
	if o.bracket {
		fmt.Fprintf(stdout, "run C: the same audience again, no API load (brackets run B against drift)\n")
		if err := c.resetEmulator(ctx); err != nil {
			return err
		}
		cr, err := c.broadcastAndWait(ctx, "load test C (no API load)", o.broadcastTimeout, nil)
		if err != nil {
			return fmt.Errorf("run C: %w", err)
		}
		rep.RunC = &cr
		rep.Emulator["run_c"], _ = c.emulatorStats(ctx)
		runs = append(runs, cr)
		rep.BaselineTokensPerSec = (a.TokensPerSec + cr.TokensPerSec) / 2
		fmt.Fprintf(stdout, "  broadcast %d %s: %d targeted in %.2fs = %.0f tokens/s\n", cr.ID, cr.Status, cr.Targeted, cr.SendSeconds, cr.TokensPerSec)
	}
	rep.Host.LoadAvgPost = loadavg()
	if rep.BaselineTokensPerSec > 0 {
		rep.DropPercent = 100 * (rep.BaselineTokensPerSec - b.TokensPerSec) / rep.BaselineTokensPerSec
	}
	worstP99 := 0.0
	for _, r := range load.Routes {
		worstP99 = max(worstP99, r.P99MS)
	}
	rep.Targets = map[string]Verdict{
		"api_p99": {Target: fmt.Sprintf("< %v on every route", o.p99Target), Value: fmt.Sprintf("%.1f ms", worstP99),
			Met: worstP99 < float64(o.p99Target)/float64(time.Millisecond)},
		"throughput_drop": {Target: fmt.Sprintf("< %.0f%%", o.dropTarget), Value: fmt.Sprintf("%.1f%%", rep.DropPercent),
			Met: rep.DropPercent < o.dropTarget},
	}
	var problems []string
	for _, r := range runs {
		if r.Status != "completed" || r.Succeeded+r.Failed+r.Canceled != r.Targeted || (o.expect > 0 && r.Targeted != o.expect) {
			problems = append(problems, fmt.Sprintf("broadcast %d: status %s, targeted %d (want %d), succeeded %d, failed %d, canceled %d",
				r.ID, r.Status, r.Targeted, o.expect, r.Succeeded, r.Failed, r.Canceled))
		}
	}
	printTable(stdout, rep)
	if o.out != "" {
		raw, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(o.out, append(raw, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", o.out, err)
		}
		fmt.Fprintf(stdout, "\nJSON report: %s\n", o.out)
	}
	if len(problems) > 0 {
		return fmt.Errorf("the broadcasts did not complete as expected:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// loopbackOnly refuses any target that is not on this machine.
func loopbackOnly(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return fmt.Errorf("%q is not a URL", raw)
	}
	if u.Hostname() == "localhost" {
		return nil
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address: the load test only runs on loopback", raw)
	}
	return nil
}

type client struct {
	api, emu, token string
	http            *http.Client
}

func (c *client) do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if strings.HasPrefix(url, c.api) {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (c *client) resetEmulator(ctx context.Context) error {
	code, body, err := c.do(ctx, http.MethodPost, c.emu+"/emulator/reset", nil)
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("resetting the emulator: %d %s %v", code, body, err)
	}
	return nil
}

func (c *client) emulatorStats(ctx context.Context) (EmuStats, error) {
	var s EmuStats
	code, body, err := c.do(ctx, http.MethodGet, c.emu+"/emulator/stats", nil)
	if err != nil || code != http.StatusOK {
		return s, fmt.Errorf("emulator stats: %d %v", code, err)
	}
	return s, json.Unmarshal(body, &s)
}

// broadcastView is the API's broadcast object as this client reads it.
type broadcastView = apiclient.Broadcast

func final(status string) bool {
	return status == "completed" || status == "canceled" || status == "failed"
}

// broadcastAndWait submits a broadcast to the whole audience, runs during
// (if any) until it returns, and polls the broadcast every 250 ms until it is
// final. during gets a channel closed when the broadcast is final.
func (c *client) broadcastAndWait(ctx context.Context, title string, timeout time.Duration, during func(id uint64, finished <-chan struct{})) (BroadcastRun, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"title": title, "body": "pushfan load test", "audience": map[string]bool{"all": true}})
	before := c.resources(ctx)
	submitted := time.Now()
	code, raw, err := c.do(ctx, http.MethodPost, c.api+"/push/broadcast?wait=0", body)
	if err != nil || (code != http.StatusAccepted && code != http.StatusOK) {
		return BroadcastRun{}, fmt.Errorf("submitting: %d %s %v", code, raw, err)
	}
	var v broadcastView
	if err := json.Unmarshal(raw, &v); err != nil {
		return BroadcastRun{}, fmt.Errorf("decoding the submit answer: %w", err)
	}
	finished := make(chan struct{})
	var wg sync.WaitGroup
	if during != nil {
		wg.Go(func() { during(v.ID, finished) })
	}
	var pollErr error
	for !final(v.Status) {
		select {
		case <-ctx.Done():
			pollErr = fmt.Errorf("broadcast %d still %s after %v: %w", v.ID, v.Status, timeout, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
		if pollErr != nil {
			break
		}
		code, raw, err := c.do(ctx, http.MethodGet, fmt.Sprintf("%s/push/broadcasts/%d", c.api, v.ID), nil)
		if err != nil || code != http.StatusOK {
			continue // transient under load; the deadline bounds the loop
		}
		_ = json.Unmarshal(raw, &v)
	}
	close(finished)
	wg.Wait()
	if pollErr != nil {
		return BroadcastRun{}, pollErr
	}
	r := BroadcastRun{
		ID: v.ID, Status: v.Status, Targeted: v.Targeted, Succeeded: v.Succeeded, Failed: v.Failed,
		Canceled: v.Canceled, Errors: v.Errors, StartedAt: v.StartedAt, FinishedAt: v.FinishedAt,
		SubmitToFinal: time.Since(submitted).Seconds(),
	}
	if after := c.resources(ctx); before != nil && after != nil {
		r.Resources = map[string]float64{}
		for k, v := range after {
			r.Resources[k] = v - before[k]
		}
	}
	if v.StartedAt != nil && v.FinishedAt != nil {
		r.SendSeconds = v.FinishedAt.Sub(*v.StartedAt).Seconds()
		if r.SendSeconds > 0 {
			r.TokensPerSec = float64(v.Targeted) / r.SendSeconds
		}
	}
	return r, nil
}

// hammer runs o.workers goroutines, each alternating GET /push/broadcasts/id
// and GET /push/stats back to back, until the broadcast is final or a cap is
// reached. Latencies are kept whole (8 bytes a request, 16 MB at the 2M cap)
// so the percentiles are exact.
func hammer(ctx context.Context, c *client, o options, id uint64, finished <-chan struct{}) LoadResult {
	routes := []struct{ name, url string }{
		{"GET /push/broadcasts/{id}", fmt.Sprintf("%s/push/broadcasts/%d", c.api, id)},
		{"GET /push/stats", c.api + "/push/stats"},
	}
	ctx, cancel := context.WithTimeout(ctx, o.maxTime)
	defer cancel()
	var issued atomic.Int64
	var stoppedBy atomic.Value
	stoppedBy.Store("broadcast_finished")
	go func() {
		select {
		case <-finished:
		case <-ctx.Done():
			stoppedBy.CompareAndSwap("broadcast_finished", "max_time")
		}
		cancel()
	}()
	type sample struct {
		lat   [2][]time.Duration
		errs  [2]map[string]int64
		count [2]int64
	}
	samples := make([]*sample, o.workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range o.workers {
		s := &sample{errs: [2]map[string]int64{{}, {}}}
		samples[w] = s
		wg.Go(func() {
			for i := w % 2; ; i ^= 1 {
				if issued.Add(1) > o.maxRequests {
					stoppedBy.CompareAndSwap("broadcast_finished", "max_requests")
					cancel()
					return
				}
				t0 := time.Now()
				code, _, err := c.do(ctx, http.MethodGet, routes[i].url, nil)
				d := time.Since(t0)
				if ctx.Err() != nil {
					return // cut short by the stop; not a measurement
				}
				s.count[i]++
				s.lat[i] = append(s.lat[i], d)
				switch {
				case err != nil:
					s.errs[i]["transport"]++
				case code != http.StatusOK:
					s.errs[i][fmt.Sprintf("http_%d", code)]++
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	res := LoadResult{Workers: o.workers, Seconds: elapsed, StoppedBy: stoppedBy.Load().(string), Routes: map[string]RouteResult{}}
	for i, r := range routes {
		var lats []time.Duration
		rr := RouteResult{ErrorsByKind: map[string]int64{}}
		for _, s := range samples {
			lats = append(lats, s.lat[i]...)
			rr.Requests += s.count[i]
			for k, n := range s.errs[i] {
				rr.ErrorsByKind[k] += n
				rr.Errors += n
			}
		}
		slices.Sort(lats)
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		if len(lats) > 0 {
			var sum time.Duration
			for _, d := range lats {
				sum += d
			}
			rr.P50MS, rr.P90MS = ms(pct(lats, 0.50)), ms(pct(lats, 0.90))
			rr.P99MS, rr.P999MS = ms(pct(lats, 0.99)), ms(pct(lats, 0.999))
			rr.MaxMS, rr.MeanMS = ms(lats[len(lats)-1]), ms(sum/time.Duration(len(lats)))
		}
		if elapsed > 0 {
			rr.RequestsPerSec = float64(rr.Requests) / elapsed
		}
		if len(rr.ErrorsByKind) == 0 {
			rr.ErrorsByKind = nil
		}
		res.Routes[r.name] = rr
		res.Requests += rr.Requests
		res.Errors += rr.Errors
	}
	if elapsed > 0 {
		res.RequestsPerSec = float64(res.Requests) / elapsed
	}
	return res
}

// resources samples cumulative counters: the server's CPU and database pool
// waits (from its /metrics, if served), the emulator's CPU and this driver's
// CPU. nil when the server has no /metrics.
func (c *client) resources(ctx context.Context) map[string]float64 {
	code, body, err := c.do(ctx, http.MethodGet, c.api+"/metrics", nil)
	if err != nil || code != http.StatusOK {
		return nil
	}
	want := map[string]string{
		"process_cpu_seconds_total":          "server_cpu_seconds",
		"go_sql_wait_count_total":            "db_pool_waits",
		"go_sql_wait_duration_seconds_total": "db_pool_wait_seconds",
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		if key, ok := want[name]; ok {
			var v float64
			if _, err := fmt.Sscan(strings.TrimSpace(rest), &v); err == nil {
				out[key] += v
			}
		}
	}
	if s, err := c.emulatorStats(ctx); err == nil {
		out["emulator_cpu_seconds"] = s.CPUSeconds
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
		out["driver_cpu_seconds"] = tv(ru.Utime) + tv(ru.Stime)
	}
	return out
}

// pct is the nearest-rank percentile of sorted.
func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func printLoad(w io.Writer, title string, l LoadResult) {
	fmt.Fprintf(w, "\n== %s (%d workers, %.1fs, stopped by %s) ==\n", title, l.Workers, l.Seconds, l.StoppedBy)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "route\trequests\treq/s\terrors\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\t")
	names := make([]string, 0, len(l.Routes))
	for n := range l.Routes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		x := l.Routes[n]
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t\n", n, x.Requests, x.RequestsPerSec, x.Errors, x.P50MS, x.P90MS, x.P99MS, x.P999MS, x.MaxMS)
	}
	fmt.Fprintf(tw, "total\t%d\t%.0f\t%d\t\t\t\t\t\t\n", l.Requests, l.RequestsPerSec, l.Errors)
	tw.Flush()
}

func printTable(w io.Writer, r Report) {
	if r.LoadAlone != nil {
		printLoad(w, "control: API load with no broadcast running", *r.LoadAlone)
	}
	printLoad(w, "API under load while broadcast B runs", r.Load)

	fmt.Fprintf(w, "\n== broadcast throughput (%d tokens) ==\n", r.RunA.Targeted)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tid\tstatus\ttargeted\tsucceeded\tsend s\ttokens/s\t")
	type row struct {
		name string
		b    BroadcastRun
	}
	rows := []row{{"A: no API load", r.RunA}, {"B: under API load", r.RunB}}
	if r.RunC != nil {
		rows = append(rows, row{"C: no API load, after B", *r.RunC})
	}
	for _, x := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%.2f\t%.0f\t\n", x.name, x.b.ID, x.b.Status, x.b.Targeted, x.b.Succeeded, x.b.SendSeconds, x.b.TokensPerSec)
	}
	tw.Flush()
	baseline := "run A"
	if r.RunC != nil {
		baseline = "the mean of runs A and C"
	}
	fmt.Fprintf(w, "throughput drop under load: %.1f%% (B against %s, %.0f tokens/s)\n", r.DropPercent, baseline, r.BaselineTokensPerSec)
	if r.RunB.Resources != nil {
		fmt.Fprintf(w, "\n== CPU seconds and database pool waits, submit to final (%d CPUs) ==\n", r.Host.CPUs)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "run\twall s\tserver cpu\temulator cpu\tdriver cpu\tdb pool waits\tdb wait s\t")
		for _, x := range rows {
			res := x.b.Resources
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.2f\t\n", x.name, x.b.SubmitToFinal, res["server_cpu_seconds"], res["emulator_cpu_seconds"],
				res["driver_cpu_seconds"], res["db_pool_waits"], res["db_pool_wait_seconds"])
		}
		tw.Flush()
	}
	if r.RunA.TokensPerSec > 0 {
		fmt.Fprintf(w, "  B against run A alone: %.1f%%\n", 100*(r.RunA.TokensPerSec-r.RunB.TokensPerSec)/r.RunA.TokensPerSec)
	}

	fmt.Fprintf(w, "\n== targets ==\n")
	for _, k := range []string{"api_p99", "throughput_drop"} {
		v := r.Targets[k]
		mark := "MET"
		if !v.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "%-16s %-22s %-10s %s\n", k, v.Target, v.Value, mark)
	}
	fmt.Fprintf(w, "host: %d CPUs, load average %s before, %s after\n", r.Host.CPUs, r.Host.LoadAvgPre, r.Host.LoadAvgPost)
}
