package fanout

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"pushfan/internal/platform/clock"
)

// SendNow sends msg to each of a handful of tokens at once, outside any Run,
// and returns each token's final outcome, in the order of tokens; Requests
// is the token's HTTP requests in all. It is how a test send reaches
// devices while the caller waits: no Source, no Progress, no checkpoints.
//
// It spends the same budget as a broadcast: every attempt takes an urgent
// permit from the Throttle (so it waits out a quota pause, and bulk sends
// hold back while it waits), counts in Demand as an urgent Run (so the
// cluster's budget gives this instance room for it), is bounded by
// SendTimeout, and a quota answer pauses every worker, as in a Run.
//
// A Transient outcome is retried at most retries times, with the engine's
// backoff (or the server's Retry-After), within MaxAttempts requests and
// only while the retry can start before ctx's deadline: the answer comes
// back by then. Tokens still waiting at the deadline end Transient with
// CodeTimeout.
func (e *Engine) SendNow(ctx context.Context, msg *Message, tokens []string, retries int) ([]Outcome, error) {
	if msg == nil {
		return nil, errors.New("fanout: SendNow needs a message")
	}
	if !e.runs.Add() {
		return nil, ErrNotRunning // stopped: Stop waits for the sends below
	}
	defer e.runs.Done()
	defer e.track(Job{Urgent: true})()
	outs := make([]Outcome, len(tokens))
	prepared, err := e.sender.Prepare(msg)
	if err != nil {
		for i := range outs {
			outs[i] = Outcome{Class: Rejected, Code: CodeMessage, Detail: err.Error()}
		}
		return outs, nil
	}
	// One goroutine a token, at most Concurrency at once: the caller bounds
	// the tokens (a test send has at most 20).
	sem := make(chan struct{}, e.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, tok := range tokens {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			outs[i] = e.sendNow(ctx, prepared, tok, retries)
		})
	}
	wg.Wait()
	return outs, nil
}

// sendNow is one token's attempts for SendNow.
func (e *Engine) sendNow(ctx context.Context, p Prepared, token string, retries int) Outcome {
	used := 0 // HTTP requests so far
	for attempt := 1; ; attempt++ {
		waitStart := time.Now()
		err := e.throttle.WaitUrgent(ctx)
		e.metrics.RateWaited(time.Since(waitStart))
		if err != nil {
			return Outcome{Class: Transient, Code: CodeTimeout, Requests: used,
				Detail: fmt.Sprintf("no rate permit before the deadline (the FCM budget is spent or paused): %v", err)}
		}
		out := e.attemptNow(ctx, p, token, used)
		used += max(out.Requests, 1)
		out.Requests = used
		if out.Class != Transient {
			return out
		}
		now := time.Now()
		if out.Code == CodeQuota {
			e.quotaPause(now, out.RetryAfter)
		}
		if attempt > retries || used >= e.cfg.MaxAttempts {
			return out
		}
		delay := backoff(e.cfg.RetryBaseDelay, e.cfg.RetryMaxDelay, attempt)
		if out.RetryAfter > 0 {
			delay = out.RetryAfter + backoff(e.cfg.RetryBaseDelay, e.cfg.RetryBaseDelay, 1)
		}
		if dl, ok := ctx.Deadline(); ok && now.Add(delay).After(dl) {
			return out // the retry could not start in time: answer with what there is
		}
		if clock.Sleep(ctx, delay) != nil {
			return out
		}
		e.metrics.Retried()
	}
}

// attemptNow is one engine attempt for SendNow, bounded by SendTimeout. A
// panic in the Sender is a transient failure, as in a Run.
func (e *Engine) attemptNow(ctx context.Context, p Prepared, token string, used int) (out Outcome) {
	ctx, cancel := context.WithTimeoutCause(ctx, e.cfg.SendTimeout, errSendTimeout)
	defer cancel()
	e.metrics.SendStarted()
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			out = Outcome{Class: Transient, Code: CodePanic, Requests: 1, Detail: fmt.Sprintf("sender panicked: %v\n%s", v, debug.Stack())}
		}
		if errors.Is(context.Cause(ctx), errSendTimeout) && out.Class == Transient {
			out.Code = CodeTimeout
		}
		e.metrics.SendDone(time.Since(start), out.Class.String(), out.Code)
	}()
	return p.Send(ctx, token, Budget{Used: used, Max: e.cfg.MaxAttempts})
}
