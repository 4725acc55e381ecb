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

	"pushfan/fanout"
	"pushfan/internal/platform/lifecycle"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// ErrShuttingDown: the service is stopping (or a newer release is
// migrating the database) and takes no new work: a broadcast, a release,
// a test send. A client retries on another instance.
var ErrShuttingDown = errors.New("service is shutting down")

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
	return errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotFound) || errors.Is(err, lease.ErrFinished) || errors.Is(err, lease.ErrOutdated) ||
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

// App is one app's sending parts on this instance (docs/apps.md): the
// engine with its own sender, throttle and workers, and the Store reading
// its tokens (repository.Store.ForApp).
type App struct {
	Name   string
	Engine *fanout.Engine
	Store  *repository.Store
	// RateLimit is the app's project quota in messages a second.
	RateLimit float64
	// Delivery is the app's delivery defaults by class (priority, TTL).
	Delivery model.DeliveryDefaults
}

// Apps are the apps this instance sends for, in configuration order.
type Apps struct {
	list   []*App
	byName map[string]*App
}

// NewApps holds list (at least one app, names unique).
func NewApps(list ...*App) *Apps {
	a := &Apps{list: list, byName: make(map[string]*App, len(list))}
	for _, app := range list {
		a.byName[app.Name] = app
	}
	return a
}

// Get is the app of that name; an empty name is the only app when there
// is one.
func (a *Apps) Get(name string) (*App, bool) {
	if name == "" && len(a.list) == 1 {
		return a.list[0], true
	}
	app, ok := a.byName[name]
	return app, ok
}

// List is every app, in configuration order.
func (a *Apps) List() []*App { return a.list }

// Busy reports whether any app's engine runs a send.
func (a *Apps) Busy() bool {
	for _, app := range a.list {
		if app.Engine.Busy() {
			return true
		}
	}
	return false
}

// Demand sums the apps' engines' demands (fanout.Engine.Demand): +Inf
// while any app runs an unpaced send, else the rate their paces (and
// urgent sends) ask for; 0 when nothing sends.
func (a *Apps) Demand() float64 {
	var sum float64
	for _, app := range a.list {
		sum += app.Engine.Demand()
	}
	return sum
}

// PermitWaits sums the apps' throttles' (fanout.Engine.PermitWaits).
func (a *Apps) PermitWaits() (waited, permits int64) {
	for _, app := range a.list {
		w, p := app.Engine.PermitWaits()
		waited += w
		permits += p
	}
	return waited, permits
}

// Single is the one app of an environment-only configuration,
// model.DefaultApp, sending through engine and reading store's tokens of
// that app.
func Single(engine *fanout.Engine, store *repository.Store, rateLimit float64) *Apps {
	return NewApps(&App{Name: model.DefaultApp, Engine: engine, Store: store.ForApp(model.DefaultApp), RateLimit: rateLimit})
}
