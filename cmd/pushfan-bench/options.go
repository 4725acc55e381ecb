package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type options struct {
	kind           string
	n, c           int
	latency        time.Duration
	jitter         time.Duration
	mode           string
	out            string
	repeat         int
	smallN         int
	probeN         int
	multiN         int
	seqN           int
	rateLimit      string
	sweep          []int
	sweepPerWorker int
	latencies      []time.Duration
	latencyModes   []string
	quota          int
	quotaWindow    time.Duration
	baselines      bool
	dropDB         bool
	dbPrefix       string
	bin            string
	build          bool
	serveEnv       []string
	scaleN         int
	scalePhases    string
	// retentionEvents and retentionWindow: the scale run's retention
	// phase (retention.go).
	retentionEvents int
	retentionWindow time.Duration
	scalePool       bool
	appsQuotas      []int
	appsSeconds     int
	appsLevels      []float64
	appsAlone       bool
	appsStagger     bool
}

func envString(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v := envString(key, ""); v != "" {
		if n, err := strconv.Atoi(strings.ReplaceAll(v, "_", "")); err == nil {
			return n
		}
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	if v := envString(key, ""); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func envBool(key string, def bool) bool {
	if v := envString(key, ""); v != "" {
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	return def
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	o := options{kind: "bench"}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		o.kind, args = args[0], args[1:]
	}
	switch o.kind {
	case "bench", "sweep", "quota", "latency", "scale", "events", "webhooks", "caps", "outcomes", "apps":
	default:
		return o, fmt.Errorf("unknown command %q (want bench, sweep, quota, latency, scale, events, webhooks, caps, outcomes or apps)", o.kind)
	}
	defN, defRepeat, defRate, defLatency := 100_000, 3, "1000000", 30*time.Millisecond
	switch o.kind {
	case "sweep":
		defRepeat = 1
	case "quota":
		defN, defRepeat, defRate = 1_000_000, 1, ""
	case "latency":
		defRepeat, defRate = 1, "" // pushfan's defaults: that is the point
	case "scale":
		defRepeat, defRate, defLatency = 1, "", 5*time.Millisecond
	case "events":
		defN, defRepeat = 50_000, 3
	case "webhooks":
		defN, defRepeat = 100_000, 3
	case "caps":
		defN, defRepeat, defRate = 100_000, 3, "" // pushfan's defaults: at its rate limit
	case "outcomes":
		defN, defRepeat, defRate = 1_000_000, 3, "" // pushfan's defaults: its rate limit and checkpoint pace
	case "apps":
		defRepeat, defRate = 1, "" // pushfan's defaults; each app's rate_limit is its quota
	}
	fs := flag.NewFlagSet("pushfan-bench "+o.kind, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.n, "n", envInt("N", defN), "tokens in the audience (env N)")
	fs.IntVar(&o.c, "c", envInt("C", 512), "pushfan's PUSHFAN_CONCURRENCY and the raw probe's goroutines (env C)")
	fs.DurationVar(&o.latency, "latency", envDuration("LATENCY", defLatency), "emulator latency per send (env LATENCY; 5ms for scale)")
	fs.IntVar(&o.scaleN, "scale-n", envInt("SCALE_N", 10_000_000), "scale: tokens, two per user, in 16 zones (env SCALE_N)")
	fs.BoolVar(&o.scalePool, "scale-buffer-pool", envString("SCALE_BUFFER_POOL", "fit") != "keep", "scale: raise innodb_buffer_pool_size to hold the seeded tables for the run (env SCALE_BUFFER_POOL=fit, the default; keep measures the server's own)")
	fs.StringVar(&o.scalePhases, "scale-phases", envString("SCALE_PHASES", ""), "scale: only these of retention,kinds,minute,cancels,consent,segment,stale,waiting (env SCALE_PHASES; default all)")
	fs.IntVar(&o.retentionEvents, "retention-events", envInt("RETENTION_EVENTS", 10_000_000), "scale, retention phase: engagement events of expired broadcasts (env RETENTION_EVENTS)")
	fs.DurationVar(&o.retentionWindow, "retention-window", envDuration("RETENTION_WINDOW", 30*time.Minute), "scale, retention phase: how long the pass may run (env RETENTION_WINDOW)")
	fs.DurationVar(&o.jitter, "jitter", envDuration("JITTER", 5*time.Millisecond), "emulator uniform extra latency (env JITTER)")
	fs.StringVar(&o.mode, "mode", envString("MODE", "tls"), "wire protocol to the emulator: tls (TLS + HTTP/2, as FCM speaks), http1 or h2c (env MODE)")
	fs.StringVar(&o.out, "out", envString("OUT", ""), "JSON result file (env OUT; default bench-results/<timestamp>-<command>.json)")
	fs.IntVar(&o.repeat, "repeat", envInt("REPEAT", defRepeat), "pushfan runs (each followed by a raw probe in bench) (env REPEAT)")
	fs.IntVar(&o.smallN, "small-n", envInt("SMALL_N", 1000), "bench: also time a broadcast of this many tokens, 0 = skip (env SMALL_N)")
	fs.IntVar(&o.probeN, "probe-n", envInt("PROBE_N", 0), "bench: sends of the raw probe, 0 = N (env PROBE_N)")
	fs.IntVar(&o.multiN, "multicast-n", envInt("MULTICAST_N", 20_000), "bench: tokens for the SendEachForMulticast baseline (env MULTICAST_N)")
	fs.IntVar(&o.seqN, "seq-n", envInt("SEQ_N", 300), "bench: tokens for the sequential Send baseline (env SEQ_N)")
	fs.StringVar(&o.rateLimit, "rate-limit", envString("RATE_LIMIT", defRate), "PUSHFAN_RATE_LIMIT for serve; empty = pushfan's default (env RATE_LIMIT)")
	sweep := fs.String("sweep", envString("SWEEP", "16,64,256,512,1024"), "sweep: concurrencies (env SWEEP)")
	fs.IntVar(&o.sweepPerWorker, "sweep-per-worker", envInt("SWEEP_PER_WORKER", 400), "sweep: audience is min(N, max(40000, this × concurrency)), 0 = always N (env SWEEP_PER_WORKER)")
	fs.IntVar(&o.quota, "quota", envInt("QUOTA", 600_000), "quota: emulator --quota (env QUOTA)")
	fs.DurationVar(&o.quotaWindow, "quota-window", envDuration("QUOTA_WINDOW", time.Minute), "quota: emulator --quota-window (env QUOTA_WINDOW)")
	latencies := fs.String("latencies", envString("LATENCIES", "10ms,30ms,100ms,300ms"), "latency: emulator latencies (env LATENCIES)")
	latencyModes := fs.String("latency-modes", envString("LATENCY_MODES", "tls,http1"), "latency: wire protocols, each swept (env LATENCY_MODES)")
	fs.BoolVar(&o.baselines, "baselines", envBool("BASELINES", true), "bench: run the baselines (env BASELINES)")
	fs.BoolVar(&o.dropDB, "drop-db", envBool("DROP_DB", false), "drop the bench databases at the end (env DROP_DB)")
	fs.StringVar(&o.dbPrefix, "db-prefix", envString("BENCH_DB_PREFIX", "pushfan_bench"), "database name prefix; the database is <prefix>_<N>")
	serveEnv := fs.String("serve-env", envString("SERVE_ENV", ""), "extra VAR=value settings for pushfan serve only, space-separated, e.g. \"GOGC=200 PUSHFAN_CHUNK_PARALLEL=1\" (env SERVE_ENV)")
	appsQuotas := fs.String("apps-quotas", envString("APPS_QUOTAS", "4000,3000,2000"), "apps: the three apps' rate_limit = their emulators' quota, messages a second (env APPS_QUOTAS)")
	fs.IntVar(&o.appsSeconds, "apps-seconds", envInt("APPS_SECONDS", 30), "apps: each app's audience is its quota × this many seconds (env APPS_SECONDS)")
	appsLevels := fs.String("apps-levels", envString("APPS_LEVELS", "1,1.5,2,3"), "apps: the runs, each with every quota times one of these (env APPS_LEVELS)")
	fs.BoolVar(&o.appsAlone, "apps-alone", envBool("APPS_ALONE", true), "apps: first run the first app alone at its base quota, the control (env APPS_ALONE)")
	fs.BoolVar(&o.appsStagger, "apps-stagger", envBool("APPS_STAGGER", true), "apps: then the first app saturated at its quota and the second started beside it (env APPS_STAGGER)")
	fs.StringVar(&o.bin, "bin", "bin/pushfan", "the pushfan binary")
	fs.BoolVar(&o.build, "build", true, "build the pushfan binary first")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, kv := range strings.Fields(*serveEnv) {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return o, fmt.Errorf("SERVE_ENV: %q is not VAR=value", kv)
		}
		o.serveEnv = append(o.serveEnv, kv)
	}
	for f := range strings.SplitSeq(*sweep, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return o, fmt.Errorf("SWEEP: %q is not a positive integer", f)
		}
		o.sweep = append(o.sweep, n)
	}
	for f := range strings.SplitSeq(*appsQuotas, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return o, fmt.Errorf("APPS_QUOTAS: %q is not a positive integer", f)
		}
		o.appsQuotas = append(o.appsQuotas, n)
	}
	for f := range strings.SplitSeq(*appsLevels, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		x, err := strconv.ParseFloat(f, 64)
		if err != nil || !(x > 0) {
			return o, fmt.Errorf("APPS_LEVELS: %q is not a positive number", f)
		}
		o.appsLevels = append(o.appsLevels, x)
	}
	if o.appsSeconds < 1 {
		return o, errors.New("APPS_SECONDS must be at least 1")
	}
	for f := range strings.SplitSeq(*latencies, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("LATENCIES: %q is not a positive duration", f)
		}
		o.latencies = append(o.latencies, d)
	}
	for f := range strings.SplitSeq(*latencyModes, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if f != "http1" && f != "h2c" && f != "tls" {
			return o, fmt.Errorf("LATENCY_MODES: %q: want http1, h2c or tls", f)
		}
		o.latencyModes = append(o.latencyModes, f)
	}
	switch {
	case o.n < 1:
		return o, errors.New("the variable N must be at least 1")
	case o.c < 1:
		return o, errors.New("the variable C must be at least 1")
	case o.repeat < 1:
		return o, errors.New("REPEAT must be at least 1")
	case o.mode != "http1" && o.mode != "h2c" && o.mode != "tls":
		return o, fmt.Errorf("MODE %q: want http1, h2c or tls", o.mode)
	}
	if o.probeN <= 0 {
		o.probeN = o.n
	}
	o.probeN = min(o.probeN, o.n)
	o.multiN = min(o.multiN, o.n)
	o.seqN = min(o.seqN, o.n)
	if o.out == "" {
		o.out = filepath.Join("bench-results", time.Now().Format("20060102-150405")+"-"+o.kind+"-"+o.mode+".json")
	}
	return o, nil
}
