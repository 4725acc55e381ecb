package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"time"

	"pushfan/fcmemu"
)

// A fault domain injects one fault at a time, at random gaps; the domains
// run side by side, so faults of different kinds overlap (a kill during a
// storm during a database outage), while a domain's own never do (one
// replica at a time is killed or paused: two would leave one replica, which
// is an outage, not a fault the soak can bound).
type domain struct {
	name  string
	first []string // kinds forced first, shuffled (the short run must see them)
	kinds []string // then any of these
}

var domains = []domain{
	{"replicas", []string{kindKill, kindPause}, []string{kindKill, kindPause}},
	{"database", []string{kindDBCut, kindDBRestart}, []string{kindDBCut, kindCommitFault, kindDBRestart}},
	{"emulator", []string{kindStorm}, []string{kindStorm, kindLatency, kindUnavailable}},
	{"webhooks", nil, []string{kindHookAway}},
}

// runFaults starts one goroutine per domain; they stop injecting when ctx
// is done, and a fault on then is undone at once (a paused replica gets its
// SIGCONT, a killed one is restarted). fail reports a fault that could not
// be injected or undone (a replica that does not come back is a finding).
func (s *stack) runFaults(ctx context.Context, wg *sync.WaitGroup, fail func(error)) {
	for i, d := range domains {
		rng := rand.New(rand.NewPCG(uint64(s.cfg.seed), uint64(i+1)))
		wg.Go(func() {
			if err := s.domainLoop(ctx, d, rng); err != nil && err != errStopped {
				fail(fmt.Errorf("%s faults: %w", d.name, err))
			}
		})
	}
}

func (s *stack) domainLoop(ctx context.Context, d domain, rng *rand.Rand) error {
	queue := append([]string(nil), d.first...)
	rng.Shuffle(len(queue), func(i, j int) { queue[i], queue[j] = queue[j], queue[i] })
	// The first fault comes within the first 40 s, the next ones after
	// gaps of cfg.gapMin to cfg.gapMax.
	gap := between(rng, 5*time.Second, 40*time.Second)
	for {
		if err := sleep(ctx, gap); err != nil {
			return err
		}
		// Drawn even when the queue decides, so that the draws after it
		// stay those of the runs before.
		kind, first := d.kinds[rng.IntN(len(d.kinds))], false
		if len(queue) > 0 {
			kind, queue, first = queue[0], queue[1:], true
		}
		if err := s.inject(ctx, kind, first, rng); err != nil {
			return err
		}
		gap = between(rng, s.cfg.gapMin, s.cfg.gapMax)
	}
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// The duplicates a fault may explain (README, "Duplicate bound after a
// kill -9"): the sends in flight (the most the emulator had at once from
// 5 s before the fault to its end, for the whole cluster and every app's
// emulator: an over-estimate for one replica) plus 150 ms at the apps'
// rate limits together for each replica that lost unstored sends: one for
// a kill or a pause, all three for a database fault. Until the fault ends,
// the bound uses its start.
func (s *stack) dupBound(replicas int) int64 {
	now := time.Now()
	return s.boundFor(replicas)(now, now)
}

func (s *stack) boundFor(replicas int) func(from, to time.Time) int64 {
	return func(from, to time.Time) int64 {
		return s.maxInFlight(from.Add(-5*time.Second), to) + int64(float64(replicas)*s.cfg.totalRate()*0.150)
	}
}

// restart starts r again as a supervisor (systemd, Kubernetes) would: a
// process that exits before it is ready (its start-up met a database
// fault) is started again, up to 5 times. It returns a note of the failed
// starts for the fault log.
func (s *stack) restart(r *replica) (string, error) {
	var failed []string
	for range 5 {
		err := s.start(r)
		if err == nil {
			if len(failed) == 0 {
				return "", nil
			}
			return fmt.Sprintf("; %d failed start(s) first: %s", len(failed), strings.Join(failed, "; ")), nil
		}
		failed = append(failed, err.Error())
		time.Sleep(time.Second) // a supervisor's restart delay, not a wait for anything
	}
	return "", fmt.Errorf("restarting %s after kill -9: 5 starts failed: %s", r.name, strings.Join(failed, "; "))
}

// inject runs one fault of kind to its end. Its wait is cut short when
// ctx is done; the undoing is not. first: one of its domain's fixed first
// faults (an emulator fault then hits the default app's emulator, as in
// the single-app soak).
func (s *stack) inject(ctx context.Context, kind string, first bool, rng *rand.Rand) error {
	log := s.faults
	switch kind {
	case kindKill:
		r := s.reps[rng.IntN(len(s.reps))]
		f := log.begin(kind, r.name, "", s.dupBound(1))
		if err := s.kill(r); err != nil {
			return err
		}
		down := between(rng, 500*time.Millisecond, 3*time.Second)
		_ = sleep(ctx, down)
		restarts, err := s.restart(r)
		if err != nil {
			return err
		}
		log.finish(f, fmt.Sprintf("down %v%s", down.Round(100*time.Millisecond), restarts), s.boundFor(1))
	case kindPause:
		r := s.reps[rng.IntN(len(s.reps))]
		d := s.cfg.lease + between(rng, time.Second, 5*time.Second)
		f := log.begin(kind, r.name, fmt.Sprintf("stopped %v", d.Round(100*time.Millisecond)), s.dupBound(1))
		if err := s.signal(r, syscall.SIGSTOP); err != nil {
			return err
		}
		_ = sleep(ctx, d)
		if err := s.signal(r, syscall.SIGCONT); err != nil {
			return err
		}
		log.finish(f, "", s.boundFor(1))
	case kindDBCut:
		f := log.begin(kind, "proxy", "every connection closed mid-whatever", s.dupBound(3))
		s.proxy.Cut()
		s.proxy.Restore()
		log.finish(f, "", s.boundFor(3))
	case kindCommitFault:
		d := between(rng, 3*time.Second, 8*time.Second)
		before := s.proxy.AppliedLost.Load() + s.proxy.NotForwarded.Load()
		f := log.begin(kind, "proxy", "", s.dupBound(3))
		s.proxy.FaultCommits(3)
		_ = sleep(ctx, d)
		s.proxy.FaultCommits(0)
		log.finish(f, fmt.Sprintf("every 3rd COMMIT for %v: %d faulted", d.Round(100*time.Millisecond), s.proxy.AppliedLost.Load()+s.proxy.NotForwarded.Load()-before), s.boundFor(3))
	case kindDBRestart:
		if s.pdb == nil {
			return s.inject(ctx, kindDBOutage, first, rng)
		}
		// A third of the restarts are crashes: InnoDB recovers at start.
		sig, how := syscall.SIGTERM, "SIGTERM"
		if rng.IntN(3) == 0 {
			sig, how = syscall.SIGKILL, "SIGKILL"
		}
		d := between(rng, time.Second, 5*time.Second)
		f := log.begin(kind, "mariadb", how, s.dupBound(3))
		t0 := time.Now()
		if err := s.pdb.stop(sig); err != nil {
			return err
		}
		stopped := time.Since(t0)
		_ = sleep(ctx, d)
		t1 := time.Now()
		if err := s.pdb.start(); err != nil {
			return fmt.Errorf("restarting the private MariaDB: %w", err)
		}
		log.finish(f, fmt.Sprintf("%s (exit after %v), down %v more, start took %v", how, stopped.Round(100*time.Millisecond),
			d.Round(100*time.Millisecond), time.Since(t1).Round(100*time.Millisecond)), s.boundFor(3))
	case kindDBOutage:
		d := between(rng, 3*time.Second, 10*time.Second)
		f := log.begin(kind, "proxy", fmt.Sprintf("refused %v", d.Round(100*time.Millisecond)), s.dupBound(3))
		s.proxy.Cut()
		_ = sleep(ctx, d)
		s.proxy.Restore()
		log.finish(f, "", s.boundFor(3))
	case kindStorm:
		d := between(rng, 3*time.Second, 10*time.Second)
		// Disarmed at the end, so that the next storm's arming is a change
		// again.
		return s.emulatorFault(ctx, kind, fmt.Sprintf("%v", d.Round(100*time.Millisecond)), d, first, rng,
			func(c *fcmemu.Config) { c.StormAfter, c.StormFor = 0, d }, func(c *fcmemu.Config) { c.StormFor = 0 })
	case kindLatency:
		d := between(rng, 5*time.Second, 10*time.Second)
		return s.emulatorFault(ctx, kind, fmt.Sprintf("%v", d.Round(100*time.Millisecond)), d, first, rng,
			func(c *fcmemu.Config) { c.Latency = 500 * time.Millisecond }, func(c *fcmemu.Config) { c.Latency = baseLatency })
	case kindUnavailable:
		d := between(rng, 3*time.Second, 8*time.Second)
		return s.emulatorFault(ctx, kind, fmt.Sprintf("30%% of sends for %v", d.Round(100*time.Millisecond)), d, first, rng,
			func(c *fcmemu.Config) { c.ErrorRates = map[string]float64{fcmemu.KindUnavailable: 0.3} }, func(c *fcmemu.Config) { c.ErrorRates = nil })
	case kindHookAway:
		// At most 8 s: the replicas retry after about 2 s, 5 s and then
		// 10 s (stack_test.go's PUSHFAN_WEBHOOK_RETRY_SCHEDULE), so every
		// event is delivered within a quarter minute of its return.
		d := between(rng, 3*time.Second, 8*time.Second)
		f := log.begin(kind, "sink", fmt.Sprintf("%v", d.Round(100*time.Millisecond)), 0)
		s.sink.away.Store(true)
		_ = sleep(ctx, d)
		s.sink.away.Store(false)
		log.finish(f, "", nil)
	default:
		return fmt.Errorf("unknown fault kind %q", kind)
	}
	return nil
}

// emulatorFault applies on to the emulators it picks, waits d (cut short
// when ctx is done) and applies off. A domain's first fault hits the
// default app's emulator; the others hit it half the time, the partner's
// three times in ten, and both the rest. The pick is drawn after the
// fault's duration, and not at all for a first fault, so that a seed's
// fixed first faults stay those of the single-app soak.
func (s *stack) emulatorFault(ctx context.Context, kind, detail string, d time.Duration, first bool, rng *rand.Rand, on, off func(*fcmemu.Config)) error {
	emus := s.emus[:1]
	if !first {
		switch n := rng.IntN(10); {
		case n >= 8:
			emus = s.emus
		case n >= 5:
			emus = s.emus[1:2]
		}
	}
	apps, target := make([]string, len(emus)), emus[0].target()
	for i, e := range emus {
		apps[i] = e.app.name
	}
	if len(emus) > 1 {
		target = "emu:both"
	}
	f := s.faults.beginOn(kind, target, detail, 0, apps)
	for _, e := range emus {
		if err := e.set(on); err != nil {
			return err
		}
	}
	_ = sleep(ctx, d)
	for _, e := range emus {
		if err := e.set(off); err != nil {
			return err
		}
	}
	s.faults.finish(f, "", nil)
	return nil
}
