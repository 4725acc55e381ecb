package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"pushfan/internal/platform/clock"
)

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
	// Cap, if set, withholds the targets of users over a frequency cap:
	// it is called with each page before any of the page's targets goes
	// to the workers, and answers per target whether it is capped. A
	// capped target is an outcome (Committed.Capped), never sent.
	Cap func(ctx context.Context, page []Target) (capped []bool, err error)
	// Tag, if set, is each send's value of Message's TagPlaceholder: for target t,
	// sent as variant (-1: no variant), at this attempt. It is called on
	// the send's worker, once per attempt.
	Tag func(t Target, variant int) string
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
	if job.Tag != nil {
		// A tagged message sent by a Sender that cannot tag would carry
		// the placeholder itself.
		for _, q := range append([]Prepared{prepared}, variants...) {
			if _, ok := q.(TaggedPrepared); !ok {
				return errors.New("fanout: the job tags its sends, and the sender cannot (no TaggedPrepared)")
			}
		}
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
// Job's Skip ranges without reading them. With a Cap, the next page is
// read and reserved while this one goes to the workers (see lookahead).
func (r *run) produce() {
	if r.job.Cap != nil {
		r.lookahead()
		return
	}
	var buf []Target
	r.read(func(s step) bool { return r.record(s) }, func() []Target { return buf }, func(b []Target) { buf = b })
}

// step is what the reader found next, recorded in the order it was read.
type step struct {
	// done is a skip range the run steps over (without page).
	done *Range
	// page is a page of targets (its buffer the reader's, until the next
	// step is asked for), with capped its Cap's answer; cut, if set, is
	// the skip range it was cut at, done once the page is enqueued.
	page   []Target
	capped []bool
	cut    *Range
	// err stops the run; with a page, it is the page's Cap that failed,
	// and abandon says that the run's stop cut it short.
	err     error
	abandon bool
}

// read pages the Source after the Job's After, stepping over its Skip
// ranges, and hands each step to yield in order until yield returns
// false, the run stops, or the Source is exhausted. get and put are the
// page buffer to read into next and the one just read (reused across
// pages).
func (r *run) read(yield func(step) bool, get func() []Target, put func([]Target)) {
	after := r.job.After
	skip := r.job.Skip
	for len(skip) > 0 && skip[0].Hi <= after {
		skip = skip[1:]
	}
	for r.ctx.Err() == nil {
		if len(skip) > 0 && skip[0].Lo <= after+1 {
			// The next targets were sent by an earlier run: record the
			// range as done and page on after it.
			if !yield(step{done: &skip[0]}) {
				return
			}
			after = skip[0].Hi
			skip = skip[1:]
			continue
		}
		buf, err := r.page(after, get())
		put(buf)
		if err != nil {
			yield(step{err: err})
			return
		}
		if len(buf) == 0 {
			return
		}
		full := len(buf) == r.e.cfg.PageSize
		// Cut the page where a skip range begins: the page shows that no
		// target lies between the last one kept and the range.
		var cut *Range
		if len(skip) > 0 {
			for i, t := range buf {
				if t.Cursor >= skip[0].Lo {
					buf, cut = buf[:i], &skip[0]
					break
				}
			}
		}
		if len(buf) > 0 {
			capped, err := r.capped(buf)
			if err != nil {
				yield(step{page: buf, err: err, abandon: r.ctx.Err() != nil})
				return
			}
			if !yield(step{page: buf, capped: capped, cut: cut}) {
				return
			}
			after = buf[len(buf)-1].Cursor
		} else if cut != nil && !yield(step{done: cut}) {
			return
		}
		switch {
		case cut != nil:
			after = max(after, cut.Hi)
			skip = skip[1:]
		case !full:
			return // a short page is the last one (skip ranges beyond it hold no targets now)
		}
	}
}

// record does what one step means for the run: false when the run stops.
func (r *run) record(s step) bool {
	switch {
	case s.err != nil:
		if s.abandon {
			r.abandon(s.page)
		}
		r.stop(s.err)
		return false
	case s.page != nil:
		if !r.enqueue(s.page, s.capped) {
			return false
		}
		if s.cut != nil {
			r.p.addDone(*s.cut)
		}
	case s.done != nil:
		r.p.addDone(*s.done)
	}
	return true
}

// enqueue hands one page's targets to the workers; false when the run
// stopped meanwhile (the targets not handed over are canceled).
func (r *run) enqueue(buf []Target, capped []bool) bool {
	pg := newPage(buf)
	if r.job.Variants != nil {
		r.job.Variants.pickAll(pg, buf)
	}
	n := len(buf)
	if capped != nil {
		// The users of a capped run's targets, for the checkpoint to
		// settle their reservations (Committed.SentUsers, UnsentUsers).
		pg.users = make([]uint64, len(buf))
		for i, t := range buf {
			pg.users[i] = t.UserID
			if capped[i] {
				pg.finish(int32(i), outCapped, nil)
				n--
			}
		}
	}
	r.p.addPage(pg)
	r.pending.Add(n)
	for i, t := range buf {
		if capped != nil && capped[i] {
			continue
		}
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

// capped asks the Job's Cap about one page (nil without a Cap),
// retrying briefly like a page read: a database blip does not fail the
// broadcast.
func (r *run) capped(buf []Target) ([]bool, error) {
	if r.job.Cap == nil {
		return nil, nil
	}
	const tries = 6
	var err error
	for try := 1; try <= tries; try++ {
		var capped []bool
		if capped, err = r.job.Cap(r.ctx, buf); err == nil {
			if len(capped) != len(buf) {
				return nil, fmt.Errorf("frequency cap answered %d targets for a page of %d", len(capped), len(buf))
			}
			return capped, nil
		}
		if r.ctx.Err() != nil {
			break
		}
		r.log.WarnContext(r.ctx, "reserving frequency-cap slots failed, retrying", "try", try, "err", err)
		if clock.Sleep(r.ctx, backoff(200*time.Millisecond, 5*time.Second, try)+100*time.Millisecond) != nil {
			break
		}
	}
	if r.ctx.Err() != nil {
		return nil, context.Cause(r.ctx)
	}
	return nil, fmt.Errorf("reserving frequency-cap slots: %w", err)
}

// abandon records a page whose Cap was cut short by the run's stop as
// canceled, with its users: the reservation may have taken their slots,
// and the checkpoint that stores these outcomes gives them back (a
// resumable one leaves them to the run that resumes, which answers the
// same users the same way).
func (r *run) abandon(buf []Target) {
	pg := newPage(buf)
	pg.users = make([]uint64, len(buf))
	for i, t := range buf {
		pg.users[i] = t.UserID
	}
	r.p.addPage(pg)
	r.pending.Add(len(buf))
	r.cancelRest(pg, 0)
}

// cancelRest finishes, as canceled, the targets of pg from index from on
// that were never enqueued (a capped one has its outcome already).
func (r *run) cancelRest(pg *page, from int) {
	for i := from; i < len(pg.ids); i++ {
		// The mask: a checkpoint may have marked the capped outcome
		// committed meanwhile.
		if pg.state[i].Load()&outMask == outCapped {
			continue
		}
		pg.finish(int32(i), outCanceled, nil)
		r.pending.Done()
	}
}
