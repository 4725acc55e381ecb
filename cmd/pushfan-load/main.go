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
	"strings"
	"syscall"
	"time"
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
