// Command pushfan-bench measures pushfan end to end with the project's own
// binaries, and compares it, in the same run and against the same emulator,
// with what a client of the firebase SDK would do and with the cheapest
// client this machine can run.
//
//	pushfan-bench [bench]   one broadcast of N tokens through the HTTP API (REPEAT times),
//	                        the raw net/http probe at the same concurrency after each, a
//	                        small-N broadcast, SendEachForMulticast and sequential Send
//	pushfan-bench sweep     the broadcast alone at several concurrencies
//	pushfan-bench quota     N=1M against an emulator enforcing FCM's 600k/min quota, at
//	                        pushfan's default rate limit: sustained rate, 429s, lost tokens
//	pushfan-bench scale     SCALE_N=10M tokens in 16 zones, one serve at its defaults: the submit of
//	                        every audience kind, time to targeted and to the first send, the
//	                        first minute's sends/s, cancel per state, a 3-user send beside
//	                        20 × 1M waiting local-time broadcasts, peak RSS (see scale.go)
//	pushfan-bench latency   the broadcast at pushfan's default configuration (concurrency,
//	                        rate limit) against emulator latencies LATENCIES=10ms,30ms,100ms,300ms,
//	                        over each of LATENCY_MODES=http1,tls: throughput, sends in flight,
//	                        connections, RSS
//
// It ensures MariaDB (scripts/ensure-mysql.sh), builds bin/pushfan, seeds its
// own database pushfan_bench_<N> (reused while it still holds N valid
// tokens), starts `pushfan emulator` and `pushfan serve` as processes, and
// stops them on exit, error or Ctrl-C. Results: a table on stdout and every
// figure in OUT (JSON). Settings come from flags or, as defaults, from the
// environment: N, C, LATENCY, JITTER, MODE (http1|h2c|tls), OUT, REPEAT,
// SMALL_N, PROBE_N, MULTICAST_N, SEQ_N, RATE_LIMIT, SWEEP, SWEEP_PER_WORKER, SCALE_N,
// QUOTA, QUOTA_WINDOW, LATENCIES, LATENCY_MODES, BASELINES, DROP_DB, SERVE_ENV. Run it from the repository root
// (make bench does).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pushfan-bench:", err)
		os.Exit(1)
	}
}

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
	scalePool      bool
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
	case "bench", "sweep", "quota", "latency", "scale":
	default:
		return o, fmt.Errorf("unknown command %q (want bench, sweep, quota, latency or scale)", o.kind)
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
	}
	fs := flag.NewFlagSet("pushfan-bench "+o.kind, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.n, "n", envInt("N", defN), "tokens in the audience (env N)")
	fs.IntVar(&o.c, "c", envInt("C", 512), "pushfan's PUSHFAN_CONCURRENCY and the raw probe's goroutines (env C)")
	fs.DurationVar(&o.latency, "latency", envDuration("LATENCY", defLatency), "emulator latency per send (env LATENCY; 5ms for scale)")
	fs.IntVar(&o.scaleN, "scale-n", envInt("SCALE_N", 10_000_000), "scale: tokens, two per user, in 16 zones (env SCALE_N)")
	fs.BoolVar(&o.scalePool, "scale-buffer-pool", envString("SCALE_BUFFER_POOL", "fit") != "keep", "scale: raise innodb_buffer_pool_size to hold the seeded tables for the run (env SCALE_BUFFER_POOL=fit, the default; keep measures the server's own)")
	fs.StringVar(&o.scalePhases, "scale-phases", envString("SCALE_PHASES", ""), "scale: only these of kinds,minute,cancels,waiting (env SCALE_PHASES; default all)")
	fs.DurationVar(&o.jitter, "jitter", envDuration("JITTER", 5*time.Millisecond), "emulator uniform extra latency (env JITTER)")
	fs.StringVar(&o.mode, "mode", envString("MODE", "http1"), "wire protocol to the emulator: http1, h2c or tls (env MODE)")
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
	latencyModes := fs.String("latency-modes", envString("LATENCY_MODES", "http1,tls"), "latency: wire protocols, each swept (env LATENCY_MODES)")
	fs.BoolVar(&o.baselines, "baselines", envBool("BASELINES", true), "bench: run the baselines (env BASELINES)")
	fs.BoolVar(&o.dropDB, "drop-db", envBool("DROP_DB", false), "drop the bench databases at the end (env DROP_DB)")
	fs.StringVar(&o.dbPrefix, "db-prefix", envString("BENCH_DB_PREFIX", "pushfan_bench"), "database name prefix; the database is <prefix>_<N>")
	serveEnv := fs.String("serve-env", envString("SERVE_ENV", ""), "extra VAR=value settings for pushfan serve only, space-separated, e.g. \"GOGC=200 PUSHFAN_CHUNK_PARALLEL=1\" (env SERVE_ENV)")
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

// bench holds what one invocation started, so everything is stopped on exit.
type bench struct {
	o      options
	dir    string
	stdout io.Writer
	stderr io.Writer
	procs  []*proc
	dbs    map[string]bool
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	if err := chdirRepoRoot(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pushfan-bench-")
	if err != nil {
		return err
	}
	b := &bench{o: o, dir: dir, stdout: stdout, stderr: stderr, dbs: map[string]bool{}}
	defer func() {
		for i := len(b.procs) - 1; i >= 0; i-- {
			b.procs[i].stop(20 * time.Second)
		}
		if o.dropDB {
			for name := range b.dbs {
				if derr := dropDB(context.Background(), name); derr != nil {
					b.logf("dropping %s: %v", name, derr)
				}
			}
		}
		if err != nil && ctx.Err() == nil {
			b.logf("logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	}()

	rep := &report{Kind: o.kind, StartedAt: time.Now().UTC(), Machine: describeMachine(), Commit: gitDescribe(),
		Settings: settingsOf(o)}
	if err := b.prepare(ctx); err != nil {
		return err
	}
	switch o.kind {
	case "bench":
		err = b.runBench(ctx, rep)
	case "sweep":
		err = b.runSweep(ctx, rep)
	case "quota":
		err = b.runQuota(ctx, rep)
	case "latency":
		err = b.runLatency(ctx, rep)
	case "scale":
		err = b.runScale(ctx, rep)
	}
	rep.FinishedAt = time.Now().UTC()
	rep.Machine.LoadAvgEnd = loadAvg()
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	if rep.hasData() {
		rep.summarize()
		rep.print(stdout)
		if werr := rep.write(o.out); werr != nil {
			return errors.Join(err, werr)
		}
		fmt.Fprintf(stdout, "\nresults written to %s\n", o.out)
	}
	return err
}

// chdirRepoRoot moves to the directory of the pushfan module's go.mod.
func chdirRepoRoot() error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if raw, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(raw), "module pushfan\n") {
			return os.Chdir(d)
		}
		if filepath.Dir(d) == d {
			return errors.New("run pushfan-bench inside the pushfan repository")
		}
	}
}

func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

func gitDescribe() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// prepare makes sure MariaDB answers and builds bin/pushfan.
func (b *bench) prepare(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, "bash", "scripts/ensure-mysql.sh")
	cmd.Stdout, cmd.Stderr = b.stderr, b.stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("scripts/ensure-mysql.sh: %w", err)
	}
	if b.o.build {
		b.logf("building %s", b.o.bin)
		cmd := exec.CommandContext(ctx, goTool(), "build", "-o", b.o.bin, "./cmd/pushfan")
		cmd.Stdout, cmd.Stderr = b.stderr, b.stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building pushfan: %w", err)
		}
	}
	return nil
}

func (b *bench) seeded(ctx context.Context, n int) (benchDB, error) {
	db, err := dbFor(b.o.dbPrefix, n)
	if err != nil {
		return db, err
	}
	b.dbs[db.name] = true
	return db, ensureSeeded(ctx, b.o.bin, db, b.logf)
}

func (b *bench) emulator(ctx context.Context, quota int) (*emulator, error) {
	emu, err := startEmulator(ctx, b.o.bin, b.dir, emulatorSpec{
		latency: b.o.latency, jitter: b.o.jitter, mode: b.o.mode, quota: quota, quotaWindow: b.o.quotaWindow,
	})
	if err != nil {
		return nil, err
	}
	b.procs = append(b.procs, emu.p)
	b.logf("emulator at %s (%s, latency %s + jitter %s)", emu.endpoint, b.o.mode, b.o.latency, b.o.jitter)
	return emu, nil
}

// broadcast starts a fresh `pushfan serve`, runs one broadcast and stops it.
func (b *bench) broadcast(ctx context.Context, emu *emulator, db benchDB, conc int, label string, tally bool) (*pushfanRun, error) {
	svc, err := startService(ctx, b.o.bin, b.dir, fmt.Sprintf("serve-%s-c%d", label, conc), emu,
		serviceSpec{db: db, concurrency: conc, rateLimit: b.o.rateLimit, extraEnv: b.o.serveEnv})
	if err != nil {
		return nil, err
	}
	b.procs = append(b.procs, svc.p)
	defer svc.stop()
	b.logf("pushfan %s: %d tokens, concurrency %d", label, db.n, conc)
	r, err := runBroadcast(ctx, svc, emu, broadcastSpec{label: label, n: db.n, conc: conc, rateLimit: b.o.rateLimit,
		tally: tally, logf: b.logf, sampleRate: true})
	if err != nil {
		if r == nil {
			return nil, fmt.Errorf("%w\nserve log:\n%s", err, svc.p.tail(20))
		}
		return r, err
	}
	b.logf("  %.0f sends/s, wall %.2fs, %.1f µs CPU/send, peak RSS %.1f MB, %d connections",
		r.SendsPerS, r.WallSeconds, r.CPUMicrosPerMsg, r.PeakRSSMB, r.EmuConnections)
	return r, nil
}

func (b *bench) runBench(ctx context.Context, rep *report) error {
	o := b.o
	db, err := b.seeded(ctx, o.n)
	if err != nil {
		return err
	}
	var tokens []string
	var bodies [][]byte
	if o.baselines {
		if tokens, err = loadTokens(ctx, db, max(o.probeN, o.multiN, o.seqN)); err != nil {
			return err
		}
		if bodies, err = wireBodies(tokens[:o.probeN]); err != nil {
			return err
		}
	}
	emu, err := b.emulator(ctx, 0)
	if err != nil {
		return err
	}
	for i := range o.repeat {
		r, err := b.broadcast(ctx, emu, db, o.c, fmt.Sprintf("run%d", i+1), o.n <= 200_000)
		if r != nil {
			rep.Pushfan = append(rep.Pushfan, r)
		}
		if err != nil {
			return err
		}
		if o.baselines {
			b.logf("raw net/http probe: %d sends, %d goroutines", len(bodies), o.c)
			p, err := rawProbe(ctx, emu, bodies, o.c)
			if err != nil {
				return err
			}
			rep.Probe = append(rep.Probe, p)
			b.logf("  %.0f sends/s, %.1f µs CPU/send, %d connections", p.SendsPerS, p.CPUMicrosPerMsg, p.EmuConnections)
		}
	}
	if o.smallN > 0 {
		if err := b.runSmall(ctx, emu, rep); err != nil {
			return err
		}
	}
	if o.baselines {
		b.logf("SDK SendEachForMulticast: %d tokens in batches of 500", o.multiN)
		m, err := multicastSDK(ctx, emu, tokens[:o.multiN])
		if err != nil {
			return err
		}
		rep.Multicast = m
		b.logf("  %.0f sends/s", m.SendsPerS)
		b.logf("SDK sequential Send: %d tokens", o.seqN)
		s, err := sequentialSDK(ctx, emu, tokens[:o.seqN])
		if err != nil {
			return err
		}
		rep.Sequential = s
		b.logf("  %.1f sends/s", s.SendsPerS)
	}
	return nil
}

// runSmall times three broadcasts of SMALL_N tokens on one fresh serve: the
// first pays for the connections to FCM, the others find them open.
func (b *bench) runSmall(ctx context.Context, emu *emulator, rep *report) error {
	db, err := b.seeded(ctx, b.o.smallN)
	if err != nil {
		return err
	}
	svc, err := startService(ctx, b.o.bin, b.dir, "serve-small", emu, serviceSpec{db: db, concurrency: b.o.c, rateLimit: b.o.rateLimit, extraEnv: b.o.serveEnv})
	if err != nil {
		return err
	}
	b.procs = append(b.procs, svc.p)
	defer svc.stop()
	for i, label := range []string{"cold", "warm1", "warm2"} {
		r, err := runBroadcast(ctx, svc, emu, broadcastSpec{label: fmt.Sprintf("small-%s", label), n: db.n, conc: b.o.c,
			rateLimit: b.o.rateLimit, tally: true})
		if r != nil {
			rep.Small = append(rep.Small, r)
		}
		if err != nil {
			return err
		}
		b.logf("pushfan %d tokens (%s, run %d): %.0f ms from POST to finished_at", db.n, label, i+1, r.WallSeconds*1000)
	}
	return nil
}

// sweepMinN is four chunks of pushfan's default width (10,000 token ids):
// with the default PUSHFAN_CHUNK_PARALLEL of 4, a smaller audience leaves
// chunk slots, hence workers, idle.
const sweepMinN = 40_000

func (b *bench) runSweep(ctx context.Context, rep *report) error {
	emu, err := b.emulator(ctx, 0)
	if err != nil {
		return err
	}
	for _, c := range b.o.sweep {
		n := b.o.n
		if b.o.sweepPerWorker > 0 {
			// At least sweepMinN, so that every chunk slot has a chunk and
			// the point measures C workers, not C/PUSHFAN_CHUNK_PARALLEL.
			n = min(n, max(sweepMinN, b.o.sweepPerWorker*c))
		}
		db, err := b.seeded(ctx, n)
		if err != nil {
			return err
		}
		for i := range b.o.repeat {
			r, err := b.broadcast(ctx, emu, db, c, fmt.Sprintf("sweep-c%d-run%d", c, i+1), n <= 200_000)
			if r != nil {
				rep.Sweep = append(rep.Sweep, r)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) runQuota(ctx context.Context, rep *report) error {
	db, err := b.seeded(ctx, b.o.n)
	if err != nil {
		return err
	}
	emu, err := b.emulator(ctx, b.o.quota)
	if err != nil {
		return err
	}
	b.logf("emulator quota: %d per %s", b.o.quota, b.o.quotaWindow)
	r, err := b.broadcast(ctx, emu, db, b.o.c, "quota", true)
	if r != nil {
		rep.Quota = r
	}
	return err
}

// runLatency runs the broadcast at pushfan's default configuration against
// each emulator latency, over each wire protocol: one configuration should
// reach the rate limit at all of them, with few connections over HTTP/2.
func (b *bench) runLatency(ctx context.Context, rep *report) error {
	db, err := b.seeded(ctx, b.o.n)
	if err != nil {
		return err
	}
	for _, mode := range b.o.latencyModes {
		for _, lat := range b.o.latencies {
			emu, err := startEmulator(ctx, b.o.bin, b.dir, emulatorSpec{latency: lat, jitter: b.o.jitter, mode: mode})
			if err != nil {
				return err
			}
			b.procs = append(b.procs, emu.p)
			label := fmt.Sprintf("%s-%s", mode, lat)
			svc, err := startService(ctx, b.o.bin, b.dir, "serve-"+label, emu, serviceSpec{db: db, extraEnv: b.o.serveEnv})
			if err != nil {
				return err
			}
			b.procs = append(b.procs, svc.p)
			b.logf("pushfan at the defaults, emulator latency %s + jitter %s over %s: %d tokens", lat, b.o.jitter, mode, db.n)
			r, err := runBroadcast(ctx, svc, emu, broadcastSpec{label: label, n: db.n, logf: b.logf, sampleRate: true})
			svc.stop()
			emu.p.stop(5 * time.Second)
			if r != nil {
				r.EmuLatency = lat.String()
				rep.Latency = append(rep.Latency, r)
				b.logf("  %.0f sends/s (sustained %.0f), %d in flight at most, %d connections, peak RSS %.1f MB",
					r.SendsPerS, r.SustainedPerS, r.EmuMaxInFlight, r.EmuConnections, r.PeakRSSMB)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *report) write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}
