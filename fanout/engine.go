package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"pushfan/internal/platform/lifecycle"
)

// Config tunes one Engine.
type Config struct {
	Concurrency    int           // sending goroutines at most (the pool follows the need below it)
	PageSize       int           // targets per Source page
	SendTimeout    time.Duration // bound on one attempt, SDK retry waits included
	MaxAttempts    int           // HTTP requests per token, SDK retries included
	RetryBaseDelay time.Duration // first backoff step
	RetryMaxDelay  time.Duration // total time a token may wait for retries
}

// Engine sends broadcasts. One Engine serves many concurrent Runs; they share
// its Sender, its Throttle and one pool of workers (at most Concurrency,
// sized to the rate and latency: see pool), so a single broadcast can use
// every worker and several broadcasts (or chunks of one) together never
// exceed Concurrency sends in flight.
//
// The engine owns its pool: Start starts the workers, Stop waits for the
// Runs in progress and then for the workers, so none outlives it.
type Engine struct {
	cfg      Config
	sender   Sender
	throttle *Throttle
	log      *slog.Logger
	metrics  Metrics

	mu   sync.Mutex
	pool *pool           // nil until Start
	runs lifecycle.Group // Runs in progress; closed by Stop
	ctrl sync.WaitGroup  // the pool's controller
	// The Runs in progress, for Demand: how many bulk ones take every
	// permit they get, how many are urgent, and the pacers of the others.
	unpaced, urgent int
	pacers          map[Pacer]int
}

// ErrNotRunning: Run was called on an engine not started, or stopped.
var ErrNotRunning = errors.New("fanout: the engine is not running (Start it; a stopped engine takes no Run)")

// Start starts the worker pool. Starting twice, or after Stop, does
// nothing.
func (e *Engine) Start(context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pool != nil || !e.runs.Add() { // started already, or stopped
		return
	}
	defer e.runs.Done()
	p := newPool(e.cfg.PageSize)
	e.pool = p
	p.target.Store(int64(want(e.throttle.Limit(), p.latency, e.cfg.Concurrency)))
	e.grow(p)
	e.ctrl.Go(func() { e.control(p) })
}

// Stop refuses new Runs, waits for those in progress to return (their
// owners stop them: see broadcast.Service.Stop), then stops the workers.
// It waits up to ctx's deadline; safe twice, and before Start.
func (e *Engine) Stop(ctx context.Context) error {
	if err := e.runs.Wait(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	p := e.pool
	if p != nil {
		select {
		case <-p.quit:
		default:
			close(p.quit) // every Run has waited for all its targets: the queues are empty
		}
	}
	e.mu.Unlock()
	if p == nil {
		return nil
	}
	return lifecycle.WaitFor(ctx, func() {
		e.ctrl.Wait()
		p.workers.Wait()
	})
}

// New builds an Engine. throttle may be shared with other Engines.
func New(cfg Config, sender Sender, throttle *Throttle, log *slog.Logger) (*Engine, error) {
	switch {
	case cfg.Concurrency < 1:
		return nil, fmt.Errorf("fanout: concurrency must be >= 1, got %d", cfg.Concurrency)
	case cfg.PageSize < 1:
		return nil, fmt.Errorf("fanout: page size must be >= 1, got %d", cfg.PageSize)
	case cfg.SendTimeout <= 0:
		return nil, fmt.Errorf("fanout: send timeout must be > 0, got %v", cfg.SendTimeout)
	case cfg.MaxAttempts < 1:
		return nil, fmt.Errorf("fanout: max attempts must be >= 1, got %d", cfg.MaxAttempts)
	case sender == nil || throttle == nil || log == nil:
		return nil, errors.New("fanout: sender, throttle and logger are required")
	}
	return &Engine{cfg: cfg, sender: sender, throttle: throttle, log: log, metrics: noMetrics{}}, nil
}

// UrgentDemand is what urgent (transactional) Runs ask of the rate
// budget: a few hundred sends, gone in a fraction of a second at it,
// without taking an equal part from every bulk sender for a heartbeat.
const UrgentDemand = 1000

// Demand is the rate the Runs in progress can use, for package quota: 0
// when none runs, +Inf when a bulk one takes every permit it gets, else the
// sum of their pacers' rates and UrgentDemand for urgent ones.
func (e *Engine) Demand() float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.unpaced > 0 {
		return math.Inf(1)
	}
	var sum float64
	for p := range e.pacers {
		sum += p.Rate()
	}
	if e.urgent > 0 {
		sum += UrgentDemand
	}
	return sum
}

// Busy reports whether any Run is in progress: a broadcast's planner
// yields to the sends while it is.
func (e *Engine) Busy() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.unpaced > 0 || e.urgent > 0 || len(e.pacers) > 0
}

// Limit is the throttle's rate (this instance's share of the project's
// budget): what the store gates of the Runs in progress allow past their
// last checkpoints, together, is window's worth of it.
func (e *Engine) Limit() float64 { return e.throttle.Limit() }

// PermitWaits is the throttle's (see Throttle.PermitWaits).
func (e *Engine) PermitWaits() (waited, permits int64) { return e.throttle.PermitWaits() }

// track counts job's Run in or (by the returned func) out, for Demand.
func (e *Engine) track(job Job) func() {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case job.Urgent:
		e.urgent++
		return func() {
			e.mu.Lock()
			e.urgent--
			e.mu.Unlock()
		}
	case job.Pace == nil:
		e.unpaced++
		return func() {
			e.mu.Lock()
			e.unpaced--
			e.mu.Unlock()
		}
	}
	if e.pacers == nil {
		e.pacers = map[Pacer]int{}
	}
	e.pacers[job.Pace]++
	return func() {
		e.mu.Lock()
		if e.pacers[job.Pace]--; e.pacers[job.Pace] == 0 {
			delete(e.pacers, job.Pace)
		}
		e.mu.Unlock()
	}
}

// SetMetrics installs m; call it before the first Run.
func (e *Engine) SetMetrics(m Metrics) {
	if m != nil {
		e.metrics = m
	}
}

// Config returns the engine's settings.
func (e *Engine) Config() Config { return e.cfg }
