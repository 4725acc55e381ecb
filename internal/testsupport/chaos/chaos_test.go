package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"pushfan/internal/platform/logging"
	"pushfan/internal/testsupport/teststack"
)

// runConfig is one soak's settings: CHAOS_DURATION and CHAOS_SEED from the
// environment, the rest fixed so that runs compare.
type runConfig struct {
	binary   string
	seed     int64
	duration time.Duration
	users    int
	// apps are the soak's apps, the default one first: each one's rate is
	// its rate_limit and its emulator's quota (per quotaWindow: the
	// drills' 10 s window, so a short run sees many).
	apps           []appSpec
	quotaWindow    time.Duration
	lease          time.Duration // the default PUSHFAN_LEASE the replicas run with
	gapMin, gapMax time.Duration // between two faults of one domain
}

// binary is built once, by TestMain, when the soak is on.
var binary string

func TestMain(m *testing.M) {
	if os.Getenv("CHAOS_DURATION") == "" {
		os.Exit(m.Run()) // the soak skips itself; nothing to build
	}
	dir, err := os.MkdirTemp("", "pushfan-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if binary, err = teststack.BuildPushfan("../../../cmd/pushfan", dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func configFromEnv(t *testing.T) runConfig {
	d, err := time.ParseDuration(os.Getenv("CHAOS_DURATION"))
	if err != nil || d < time.Minute {
		t.Fatalf("CHAOS_DURATION=%q: want a duration of 1m or more (e.g. 3m, 30m): %v", os.Getenv("CHAOS_DURATION"), err)
	}
	seed := time.Now().UnixNano() % 1_000_000
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED=%q: want an integer: %v", v, err)
		}
	}
	return runConfig{binary: binary, seed: seed, duration: d, users: 20000, apps: soakApps(), quotaWindow: 10 * time.Second,
		lease: 10 * time.Second, gapMin: 15 * time.Second, gapMax: 45 * time.Second}
}

// violation is a broken invariant: the first one stops the run.
type violation struct {
	at        time.Duration // since the start
	broadcast uint64        // 0: none in particular
	what      string
}

// run is one soak in progress: its start, its stop, what it found.
type run struct {
	t0   time.Time
	stop context.CancelFunc // stops the load and the faults

	mu         sync.Mutex
	violations []violation
}

func (r *run) violate(broadcast uint64, what string) {
	r.mu.Lock()
	r.violations = append(r.violations, violation{time.Since(r.t0), broadcast, what})
	r.mu.Unlock()
	r.stop()
}

func (r *run) found() []violation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]violation(nil), r.violations...)
}

// TestChaosSoak is make chaos: see the package doc.
func TestChaosSoak(t *testing.T) {
	if os.Getenv("CHAOS_DURATION") == "" {
		t.Skip("the chaos soak runs with make chaos (CHAOS_DURATION set)")
	}
	cfg := configFromEnv(t)
	t.Logf("chaos soak: CHAOS_DURATION=%v CHAOS_SEED=%d (replay: make chaos CHAOS_DURATION=%v CHAOS_SEED=%d)", cfg.duration, cfg.seed, cfg.duration, cfg.seed)
	log, err := logging.New(os.Stderr, "text", "info")
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, cfg, log)
	ctx, stop := context.WithTimeout(t.Context(), cfg.duration)
	defer stop()
	r := &run{t0: time.Now(), stop: stop}
	l := newLoad(s, r)
	c := newChecker(s, r, l)

	var work, checking sync.WaitGroup
	checkCtx, stopChecking := context.WithCancel(t.Context())
	defer stopChecking()
	checking.Go(func() { c.loop(checkCtx) })
	checking.Go(func() { s.probe.run(checkCtx) })
	l.start(ctx, &work)
	s.runFaults(ctx, &work, func(err error) { r.violate(0, err.Error()) })
	progressLog(ctx, &work, s, r, log)
	work.Wait()
	loadEnd := time.Now()
	log.Info("chaos: load and faults stopped; draining", "after", loadEnd.Sub(r.t0).Round(time.Second))

	if len(r.found()) == 0 {
		drain(t.Context(), s, r, l, c)
	}
	stopChecking()
	checking.Wait()
	if len(r.found()) == 0 {
		c.check(time.Now()) // once more, on the drained run
		finalChecks(s, r, l, c, loadEnd)
	}
	rep := newReport(s, r, l, c, loadEnd)
	t.Log("\n" + rep)
	if path := os.Getenv("CHAOS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(rep), 0o644); err != nil {
			t.Errorf("writing CHAOS_REPORT %s: %v", path, err)
		}
	}
	if vs := r.found(); len(vs) > 0 {
		t.Fatalf("%d violation(s); replay with CHAOS_SEED=%d CHAOS_DURATION=%v (see the fault log and the broadcasts above)", len(vs), cfg.seed, cfg.duration)
	}
}

// progressLog logs a line a minute, so that a long soak shows it lives.
func progressLog(ctx context.Context, wg *sync.WaitGroup, s *stack, r *run, log *slog.Logger) {
	wg.Go(func() {
		for sleep(ctx, time.Minute) == nil {
			log.Info("chaos: running", "elapsed", time.Since(r.t0).Round(time.Second), "accepted", s.accepted(),
				"requests", s.requests(), "faults", len(s.faults.snapshot()), "violations", len(r.found()))
		}
	})
}
