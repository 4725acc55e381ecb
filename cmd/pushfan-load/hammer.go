package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

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
