package fanout

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

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
				r.attempt(&it, sc, p)
				p.busy.Add(-1)
			}
		}
		if p.shrink() {
			return
		}
	}
}

// permit waits for a rate permit for one of r's sends, and for r's gate
// to be open when the permit comes. Else the permit goes back to the
// throttle, for a send of another Run whose gate is open (or for r's own
// once its gate opens): dropped, it was a send the app never made, and
// with a gate closing at every slow commit, each worker waiting there
// dropped one each time (issue 38: about a tenth of an app's rate beside
// another app's bulk). The send waits for the gate, then for a permit.
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
		e.throttle.giveBack()
		if err := r.job.Gate.Wait(r.ctx); err != nil {
			return err
		}
	}
}

// attempt makes one engine attempt (which may hide several requests of a
// Sender that retries by itself, capped by the token's budget) and routes
// the outcome.
//
// A worker parks in it for the whole round trip, so it is kept small: it
// takes the item by pointer and leaves the routing to route (frames a
// parked worker holds are the stack it keeps; see StartingPrepared).
func (r *run) attempt(it *item, sc *sendScope, p *pool) {
	ctx := sc.begin()
	r.e.metrics.SendStarted()
	sendStart := time.Now()
	out, pend := r.send(ctx, it.t, it.variant(), int(it.attempts))
	if pend != nil {
		out = wait(ctx, pend)
	}
	r.route(it, &out, time.Since(sendStart), sc, p)
}

// route counts an attempt's outcome and sends its target on: done,
// failed, retried, or the run stopped.
//
//go:noinline
func (r *run) route(itp *item, o *Outcome, took time.Duration, sc *sendScope, p *pool) {
	it, out := *itp, *o
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
// (variant >= 0), or t's own personalized one. A StartingPrepared's send is
// only started: the caller waits for pend. A panic in the Sender is a
// transient failure.
func (r *run) send(ctx context.Context, t Target, variant, used int) (out Outcome, pend Pending) {
	defer func() {
		if v := recover(); v != nil {
			out, pend = panicked(v), nil
		}
	}()
	p := r.msg
	if variant == noVariant {
		return Outcome{Class: Rejected, Code: CodeMessage, Detail: "no message variant for this target"}, nil
	}
	if variant >= 0 && r.vmsgs != nil {
		p = r.vmsgs[variant]
	}
	if r.job.Personalize != nil {
		m, err := r.job.Personalize(t)
		if err != nil {
			return Outcome{Class: Rejected, Code: CodeTemplate, Detail: err.Error()}, nil
		}
		if p, err = r.e.sender.Prepare(m); err != nil {
			return Outcome{Class: Rejected, Code: CodeMessage, Detail: err.Error()}, nil
		}
	}
	b := Budget{Used: used, Max: r.e.cfg.MaxAttempts}
	if sp, ok := p.(StartingPrepared); ok {
		var tag string
		if r.job.Tag != nil {
			tag = r.job.Tag(t, variant)
		}
		return Outcome{}, sp.StartTagged(ctx, t.Token, tag, b)
	}
	if r.job.Tag != nil {
		if tp, ok := p.(TaggedPrepared); ok {
			return tp.SendTagged(ctx, t.Token, r.job.Tag(t, variant), b), nil
		}
	}
	return p.Send(ctx, t.Token, b), nil
}

// wait waits for a started send. It is its own small frame, called from
// attempt rather than from send: a worker parks here for the whole round
// trip, and what its stack holds then is what the stack keeps (see
// StartingPrepared).
func wait(ctx context.Context, pend Pending) (out Outcome) {
	defer func() {
		if v := recover(); v != nil {
			out = panicked(v)
		}
	}()
	return pend.Wait(ctx)
}

func panicked(v any) Outcome {
	return Outcome{Class: Transient, Code: CodePanic, Detail: fmt.Sprintf("sender panicked: %v\n%s", v, debug.Stack())}
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
