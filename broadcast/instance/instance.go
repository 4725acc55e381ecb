// Package instance holds what the parts of one instance's broadcast
// service share: its lease name, its clock and logger, the two contexts
// its stop cancels, the group that owns its goroutines, and its database
// retries. The planner (package plan) and the chunk runs (package run) each
// get the same *Instance from the Service that wires them.
package instance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"pushfan/internal/platform/lifecycle"
	"pushfan/lease"
	"pushfan/repository"
)

// RefuseFor is how long an instance leaves a broadcast alone after
// handing one of its chunks or its plan back: long enough not to spin on
// it, short enough to notice soon when no instance can run it either.
const RefuseFor = 5 * time.Second

// Instance is one running service's identity and lifecycle.
type Instance struct {
	Owner     string        // this instance's name in leases
	Lease     time.Duration // a chunk's or a plan's lease
	DBTimeout time.Duration // deadline of every database call
	Log       *slog.Logger
	Now       func() time.Time

	// Stopping is two steps with a context each, as in river: Claiming
	// ends first (no chunk or plan claimed, no broadcast promoted, no
	// submit taken), then Running, the parent of every chunk run and plan,
	// is canceled with a cause so that runs checkpoint and release their
	// work.
	Claiming context.Context
	Running  context.Context
	// Group is every goroutine of the service; Stop waits for it.
	Group *lifecycle.Group
}

// RetryDB runs fn with the DB deadline, retrying with backoff for about
// half a minute: a short database outage must not lose a broadcast's
// outcome.
func (in *Instance) RetryDB(ctx context.Context, what string, fn func(context.Context) error) error {
	return in.RetryDBUnless(ctx, what, isAnswer, fn)
}

// RetryDBUnless is RetryDB that also gives up at once on an error final
// says a retry cannot change.
func (in *Instance) RetryDBUnless(ctx context.Context, what string, final func(error) bool, fn func(context.Context) error) error {
	var err error
	delay := 100 * time.Millisecond
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, cancel := context.WithTimeout(ctx, in.DBTimeout)
		err = fn(c)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) || final(err) {
			break
		}
		in.Log.WarnContext(ctx, "database call failed, retrying", "what", what, "err", err, "in", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 3*time.Second)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// isAnswer reports errors that are the database's answer, not a failure
// to reach it: retrying cannot change them.
func isAnswer(err error) bool {
	return errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotFound) || errors.Is(err, lease.ErrFinished) ||
		errors.Is(err, repository.ErrNotFound) || errors.Is(err, repository.ErrDuplicateKey)
}

// Idle is a claim loop's pause after a claim that found no work (err: it
// failed, logged as the claim of what): until wake, poll on idle, or the
// end of claiming, when it returns false.
func (in *Instance) Idle(idle *time.Timer, poll time.Duration, wake <-chan struct{}, what string, err error) bool {
	if err != nil && in.Claiming.Err() == nil {
		in.Log.Warn("claiming "+what+" failed", "err", err)
	}
	idle.Reset(poll)
	select {
	case <-in.Claiming.Done():
		return false
	case <-wake:
	case <-idle.C:
	}
	return true
}
