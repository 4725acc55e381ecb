package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"sync"
	"time"

	"pushfan/internal/platform/clock"
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

// RunShare is the rate limit split evenly over the Runs in progress (the
// whole limit when none runs): what a chunk run's store gate lets one run
// have past its last checkpoint, so that the runs of an instance together
// stay within the limit's worth whatever the rate limiter's bucket holds.
func (e *Engine) RunShare() float64 {
	e.mu.Lock()
	runs := e.unpaced + e.urgent
	for _, n := range e.pacers {
		runs += n
	}
	e.mu.Unlock()
	return e.throttle.Limit() / float64(max(runs, 1))
}

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

// Job is one Run's input.
type Job struct {
	BroadcastID uint64
	Message     *Message
	Source      Source
	// After is the resume cursor: only targets with Cursor > After are sent.
	After uint64
	// Skip are ranges above After (sorted, disjoint) whose targets a
	// previous run already has outcomes for: they are not sent again, and
	// they stay in Progress's done ranges until the cursor passes them.
	Skip     []Range
	Progress *Progress // required; the caller commits from it while Run works
	// Personalize, if set, builds each target's message instead of Message.
	Personalize Personalizer
	// Variants, if set, picks each target's message among a few prepared
	// ones (instead of Message) and counts targets per variant.
	Variants *Variants
	// Urgent (a transactional broadcast) goes ahead of bulk runs: its
	// targets take the urgent queue and its sends the first permits.
	Urgent bool
	// Pace, if set, spreads the run's targets: each waits for it before it
	// is handed to the workers (never a worker waiting on it).
	Pace Pacer
	// Gate, if set, is waited on before each new target is handed to the
	// workers (retries of failed sends do not wait: they cannot repeat).
	Gate Gate
}

// item is one target on its way through the engine. It travels by value so
// the hot path allocates nothing per target for bookkeeping.
type item struct {
	r         *run
	t         Target
	pg        *page
	idx       int32 // index in pg
	attempts  int32 // requests so far (a Sender's own retries included)
	retries   int32 // engine-level re-queues so far
	firstFail time.Time
	due       time.Time
}

// Run sends job.Message to every target of job.Source and returns when each
// one has ended succeeded, failed or canceled, and its own goroutines have
// exited. The engine must be started (ErrNotRunning otherwise).
//
// Cancelling ctx stops taking new work: queued and waiting targets are
// counted canceled, while sends already in flight finish (bounded by
// SendTimeout) so their outcome is known. Run then returns ctx's cause.
// A Fatal outcome stops the run the same way and returns *ErrFatal.
func (e *Engine) Run(ctx context.Context, job Job) error {
	if job.Message == nil || job.Source == nil || job.Progress == nil {
		return errors.New("fanout: job needs a message, a source and a progress")
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	job.Progress.Reset(job.After, job.Skip)
	prepared, err := e.sender.Prepare(job.Message)
	if err != nil {
		return &ErrFatal{Outcome: Outcome{Class: Fatal, Code: CodeMessage, Detail: err.Error()}}
	}
	variants, err := e.prepareVariants(job)
	if err != nil {
		return err
	}
	if !e.runs.Add() {
		return ErrNotRunning // stopped
	}
	defer e.runs.Done()
	defer e.track(job)()
	e.mu.Lock()
	p := e.pool
	e.mu.Unlock()
	if p == nil {
		return ErrNotRunning // never started
	}
	work := p.bulk
	if job.Urgent {
		work = p.urgent
	}
	r := &run{
		e:     e,
		job:   job,
		p:     job.Progress,
		ctx:   runCtx,
		stop:  stop,
		msg:   prepared,
		vmsgs: variants,
		work:  work,
		slots: make(chan struct{}, 2*e.cfg.PageSize+e.cfg.Concurrency),
		queue: newDelayQueue(),
		log:   e.log.With("broadcast_id", job.BroadcastID),
	}
	r.start()
	// nil after a full run; the parent's cause after a cancel; *ErrFatal or
	// the Source's error when the run stopped itself.
	return context.Cause(runCtx)
}

type run struct {
	e       *Engine
	job     Job
	p       *Progress
	ctx     context.Context
	stop    context.CancelCauseFunc
	msg     Prepared      // the job's message, prepared once
	vmsgs   []Prepared    // Job.Variants' messages, prepared once (nil without, or with a Personalize)
	work    chan<- item   // the pool's queue for this run's class
	slots   chan struct{} // outstanding targets: bounds memory during retry storms
	queue   *delayQueue
	pending sync.WaitGroup // targets read and not yet finished
	log     *slog.Logger
}

func (r *run) start() {
	var helpers sync.WaitGroup
	stopQueue := make(chan struct{})
	helpers.Go(func() { r.queue.run(r.ctx, stopQueue, r.work, r.cancelItem, r.job.Pace) })

	r.produce() // in this goroutine: returns when the Source is exhausted or the run stops
	r.pending.Wait()
	close(stopQueue)
	helpers.Wait()
}

// produce pages the Source into the work channel, stepping over the
// Job's Skip ranges without reading them.
func (r *run) produce() {
	after := r.job.After
	skip := r.job.Skip
	for len(skip) > 0 && skip[0].Hi <= after {
		skip = skip[1:]
	}
	var buf []Target
	for r.ctx.Err() == nil {
		if len(skip) > 0 && skip[0].Lo <= after+1 {
			// The next targets were sent by an earlier run: record the
			// range as done and page on after it.
			r.p.addDone(skip[0])
			after = skip[0].Hi
			skip = skip[1:]
			continue
		}
		var err error
		buf, err = r.page(after, buf)
		if err != nil {
			r.stop(err)
			return
		}
		if len(buf) == 0 {
			return
		}
		full := len(buf) == r.e.cfg.PageSize
		// Cut the page where a skip range begins: the page shows that no
		// target lies between the last one kept and the range.
		cut := false
		if len(skip) > 0 {
			for i, t := range buf {
				if t.Cursor >= skip[0].Lo {
					buf, cut = buf[:i], true
					break
				}
			}
		}
		if len(buf) > 0 {
			if !r.enqueue(buf) {
				return
			}
			after = buf[len(buf)-1].Cursor
		}
		switch {
		case cut:
			r.p.addDone(skip[0])
			after = max(after, skip[0].Hi)
			skip = skip[1:]
		case !full:
			return // a short page is the last one (skip ranges beyond it hold no targets now)
		}
	}
}

// enqueue hands one page's targets to the workers; false when the run
// stopped meanwhile (the targets not handed over are canceled).
func (r *run) enqueue(buf []Target) bool {
	pg := newPage(buf)
	if r.job.Variants != nil {
		r.job.Variants.pickAll(pg, buf)
	}
	r.p.addPage(pg)
	r.pending.Add(len(buf))
	for i, t := range buf {
		it := item{r: r, t: t, pg: pg, idx: int32(i)}
		if r.job.Gate != nil {
			if err := r.job.Gate.Wait(r.ctx); err != nil {
				r.cancelRest(pg, i)
				return false
			}
		}
		if r.job.Pace != nil {
			if err := r.job.Pace.Wait(r.ctx); err != nil {
				r.cancelRest(pg, i)
				return false
			}
		}
		select {
		case r.slots <- struct{}{}:
		case <-r.ctx.Done():
			r.cancelRest(pg, i)
			return false
		}
		select {
		case r.work <- it:
		case <-r.ctx.Done():
			<-r.slots
			r.cancelRest(pg, i)
			return false
		}
	}
	return true
}

// page reads one page, retrying briefly so a database blip does not fail
// the whole broadcast.
func (r *run) page(after uint64, buf []Target) ([]Target, error) {
	const tries = 6
	var err error
	for try := 1; try <= tries; try++ {
		buf, err = r.job.Source.Page(r.ctx, after, r.e.cfg.PageSize, buf)
		if err == nil || r.ctx.Err() != nil {
			break
		}
		r.log.WarnContext(r.ctx, "reading audience page failed, retrying", "after", after, "try", try, "err", err)
		if clock.Sleep(r.ctx, backoff(200*time.Millisecond, 5*time.Second, try)+100*time.Millisecond) != nil {
			break
		}
	}
	if err != nil && r.ctx.Err() == nil {
		return buf, fmt.Errorf("reading audience after token %d: %w", after, err)
	}
	if r.ctx.Err() != nil {
		return buf[:0], nil
	}
	return buf, nil
}

// cancelRest finishes, as canceled, the targets of pg from index from on
// that were never enqueued.
func (r *run) cancelRest(pg *page, from int) {
	for i := from; i < len(pg.ids); i++ {
		pg.finish(int32(i), outCanceled, nil)
		r.pending.Done()
	}
}

// worker sends targets of any Run until the pool quits or has more
// workers than it wants.
func (e *Engine) worker(p *pool) {
	sc := newSendScope(e.cfg.SendTimeout) // reused for every send
	defer sc.close()
	for {
		it, ok, trimmed := p.next()
		if trimmed {
			if p.shrink() {
				return
			}
			continue
		}
		if !ok {
			p.live.Add(-1)
			return
		}
		r := it.r
		if r.ctx.Err() != nil {
			r.cancelItem(it)
		} else {
			if err := e.permit(r); err != nil {
				r.cancelItem(it)
			} else {
				p.busy.Add(1)
				r.attempt(it, sc, p)
				p.busy.Add(-1)
			}
		}
		if p.shrink() {
			return
		}
	}
}

// permit waits for a rate permit for one of r's sends, and for r's gate
// to be open when the permit comes (else the permit is let go: the send
// waits for the gate, then for a fresh permit).
func (e *Engine) permit(r *run) error {
	for {
		waitStart := time.Now()
		var err error
		if r.job.Urgent {
			err = e.throttle.WaitUrgent(r.ctx)
		} else {
			err = e.throttle.Wait(r.ctx)
		}
		e.metrics.RateWaited(time.Since(waitStart))
		if err != nil || r.job.Gate == nil || r.job.Gate.Open() {
			return err
		}
		if err := r.job.Gate.Wait(r.ctx); err != nil {
			return err
		}
	}
}

// attempt makes one engine attempt (which may hide several requests of a
// Sender that retries by itself, capped by the token's budget) and routes
// the outcome.
func (r *run) attempt(it item, sc *sendScope, p *pool) {
	ctx := sc.begin()
	r.e.metrics.SendStarted()
	sendStart := time.Now()
	out := r.send(ctx, it.t, it.variant(), int(it.attempts))
	took := time.Since(sendStart)
	p.timed(took)
	if cause := sc.end(); errors.Is(cause, errSendTimeout) && out.Class == Transient {
		out.Code = CodeTimeout
	}
	it.attempts += int32(max(out.Requests, 1))

	r.e.metrics.SendDone(took, out.Class.String(), out.Code)
	switch out.Class {
	case Success:
		r.done(it, outSucceeded, nil)
	case Dead:
		r.fail(it, out, true)
	case Rejected:
		r.fail(it, out, false)
	case Fatal:
		r.fail(it, out, false)
		r.log.ErrorContext(r.ctx, "stopping broadcast: FCM refused the request for every token", "code", out.Code, "detail", out.Detail)
		r.stop(&ErrFatal{Outcome: out})
	case Transient:
		r.retry(it, out)
	}
}

// send makes one attempt at t: the run's prepared message, its variant's
// (variant >= 0), or t's own personalized one. A panic in the Sender is a
// transient failure.
func (r *run) send(ctx context.Context, t Target, variant, used int) (out Outcome) {
	defer func() {
		if v := recover(); v != nil {
			out = Outcome{Class: Transient, Code: CodePanic, Detail: fmt.Sprintf("sender panicked: %v\n%s", v, debug.Stack())}
		}
	}()
	p := r.msg
	if variant == noVariant {
		return Outcome{Class: Rejected, Code: CodeMessage, Detail: "no message variant for this target"}
	}
	if variant >= 0 && r.vmsgs != nil {
		p = r.vmsgs[variant]
	}
	if r.job.Personalize != nil {
		m, err := r.job.Personalize(t)
		if err != nil {
			return Outcome{Class: Rejected, Code: CodeTemplate, Detail: err.Error()}
		}
		if p, err = r.e.sender.Prepare(m); err != nil {
			return Outcome{Class: Rejected, Code: CodeMessage, Detail: err.Error()}
		}
	}
	return p.Send(ctx, t.Token, Budget{Used: used, Max: r.e.cfg.MaxAttempts})
}

func (r *run) retry(it item, out Outcome) {
	now := time.Now()
	if out.Code == CodeQuota {
		r.e.quotaPause(now, out.RetryAfter)
	}
	if int(it.attempts) >= r.e.cfg.MaxAttempts {
		r.fail(it, out, false)
		return
	}
	if it.firstFail.IsZero() {
		it.firstFail = now
	}
	it.retries++
	delay := backoff(r.e.cfg.RetryBaseDelay, r.e.cfg.RetryMaxDelay, int(it.retries))
	if out.RetryAfter > 0 {
		// Honour the server, plus jitter so the retries do not all land on
		// the same instant when the window reopens.
		delay = out.RetryAfter + backoff(r.e.cfg.RetryBaseDelay, r.e.cfg.RetryBaseDelay, 1)
	}
	if now.Add(delay).Sub(it.firstFail) > r.e.cfg.RetryMaxDelay {
		r.fail(it, out, false)
		return
	}
	if r.ctx.Err() != nil {
		r.cancelItem(it)
		return
	}
	it.due = now.Add(delay)
	r.e.metrics.Retried()
	r.log.DebugContext(r.ctx, "send will be retried", "token", TokenHint(it.t.Token), "code", out.Code, "attempts", it.attempts, "in", delay)
	r.queue.push(it)
}

// quotaPause pauses the throttle after a quota answer. The quota is the
// project's: every worker pauses, not just the one that got it. A
// Retry-After beyond RetryMaxDelay (a proxy's or a bug's) would stall every
// broadcast for that long; the tokens that cannot wait that long fail
// instead, and the pause is capped.
func (e *Engine) quotaPause(now time.Time, retryAfter time.Duration) {
	pause := min(retryAfter, e.cfg.RetryMaxDelay)
	if pause <= 0 {
		pause = time.Second
	}
	e.throttle.Pause(now.Add(pause))
}

func (r *run) fail(it item, out Outcome, dead bool) {
	r.log.DebugContext(r.ctx, "send failed", "token", TokenHint(it.t.Token), "code", out.Code, "attempts", it.attempts, "dead", dead)
	r.done(it, outFailed, &Failure{Target: it.t, Code: out.Code, Message: out.Detail, Attempts: int(it.attempts), Dead: dead})
}

func (r *run) cancelItem(it item) {
	r.done(it, outCanceled, nil)
}

func (r *run) done(it item, outcome uint32, f *Failure) {
	it.pg.finish(it.idx, outcome, f)
	<-r.slots
	r.pending.Done()
}

// TokenHint shortens a device token for logs: tokens are credentials to a
// user's device and never appear whole.
func TokenHint(token string) string {
	if len(token) <= 10 {
		return token[:min(len(token), 4)] + "…"
	}
	return token[:10] + "…"
}
