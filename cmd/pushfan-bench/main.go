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
//	pushfan-bench apps      three apps on one serve at its defaults, each app's emulator
//	                        enforcing its rate_limit (APPS_QUOTAS=4000,3000,2000) as its
//	                        quota, a bulk broadcast of each at once: per-app sustained sends/s
//	                        against its quota, the total, CPU/send, RSS; first the first app
//	                        alone (APPS_ALONE) and staggered beside the second (APPS_STAGGER),
//	                        then every quota scaled by APPS_LEVELS=1,1.5,2,3 to find where one
//	                        instance stops keeping up
//	pushfan-bench latency   the broadcast at pushfan's default configuration (concurrency,
//	                        rate limit) against emulator latencies LATENCIES=10ms,30ms,100ms,300ms,
//	                        over each of LATENCY_MODES=tls,http1: throughput, sends in flight,
//	                        connections, RSS
//
// It ensures MariaDB (scripts/ensure-mysql.sh), builds bin/pushfan, seeds its
// own database pushfan_bench_<N> (reused while it still holds N valid
// tokens), starts `pushfan emulator` and `pushfan serve` as processes, and
// stops them on exit, error or Ctrl-C. Results: a table on stdout and every
// figure in OUT (JSON). Settings come from flags or, as defaults, from the
// environment: N, C, LATENCY, JITTER, MODE (tls|http1|h2c, tls by default), OUT, REPEAT,
// SMALL_N, PROBE_N, MULTICAST_N, SEQ_N, RATE_LIMIT, SWEEP, SWEEP_PER_WORKER, SCALE_N,
// QUOTA, QUOTA_WINDOW, LATENCIES, LATENCY_MODES, BASELINES, DROP_DB, SERVE_ENV. Run it from the repository root
// (make bench does).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
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
	case "events":
		err = b.runEvents(ctx, rep)
	case "webhooks":
		err = b.runWebhooks(ctx, rep)
	case "caps":
		err = b.runCaps(ctx, rep)
	case "outcomes":
		err = b.runOutcomes(ctx, rep)
	case "apps":
		err = b.runApps(ctx, rep)
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
