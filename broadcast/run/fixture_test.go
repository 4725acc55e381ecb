package run

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/broadcast/instance"
	"pushfan/broadcast/plan"
	"pushfan/fanout"
	"pushfan/internal/platform/lifecycle"
	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/webhook"
)

// wait bounds every wait of these tests: a broadcast of a few hundred
// targets runs in well under a second, under the race detector too.
const wait = time.Minute

// timeoutHeld is the send timeout of a test whose sends hang (fakeFCM's
// hold): how long a send in flight holds its run's end.
const timeoutHeld = time.Second

// maxAttempts is the engine's attempts per token: a token that keeps
// failing transiently ends failed after this many sends.
const maxAttempts = 3

// fixture is a test database with an audience in it, the fake FCM every
// runner of the test sends through, and the lease store the runners and
// the test share.
type fixture struct {
	t      *testing.T
	c      context.Context // the test's database calls: they end with it, at the latest
	db     *testdb.DB
	leases *lease.Store
	fcm    *fakeFCM
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := testdb.New(t)
	c, cancel := context.WithTimeout(t.Context(), 5*wait)
	t.Cleanup(cancel)
	return &fixture{t: t, c: c, db: db, leases: lease.New(db.SQL.DB, slog.New(slog.DiscardHandler)), fcm: newFakeFCM()}
}

func (f *fixture) ctx() context.Context { return f.c }

// user is one row of the audience: user id and token id are both id.
type user struct {
	id      uint64
	token   string
	zone    string // "" for NULL
	invalid bool   // the token was invalidated before: never a target
	off     bool   // the user turned pushes off: never a target
}

func (u user) target() bool { return !u.invalid && !u.off }

// seed stores users and one token each.
func (f *fixture) seed(users []user) {
	f.t.Helper()
	var us, ts []string
	var uargs, targs []any
	for _, u := range users {
		var zone, invalidated any
		if u.zone != "" {
			zone = u.zone
		}
		if u.invalid {
			invalidated = time.Now()
		}
		us = append(us, "(?, ?, ?)")
		uargs = append(uargs, u.id, !u.off, zone)
		ts = append(ts, "(?, ?, ?, ?)")
		targs = append(targs, u.id, u.id, u.token, invalidated)
	}
	if _, err := f.db.SQL.ExecContext(f.ctx(), "INSERT INTO users (id, push_enabled, timezone) VALUES "+strings.Join(us, ", "), uargs...); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.db.SQL.ExecContext(f.ctx(), "INSERT INTO device_tokens (id, user_id, token, invalidated_at) VALUES "+strings.Join(ts, ", "), targs...); err != nil {
		f.t.Fatal(err)
	}
}

// submitPlanned stores a broadcast of audience a with its whole plan, as
// a submit of a bounded audience does: chunks of width over cursors
// (0, upto], each with width targets.
func (f *fixture) submitPlanned(a model.Audience, width, upto uint64) uint64 {
	f.t.Helper()
	b := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "t"}, Audience: a}}
	st := &lease.Step{Cursor: upto, Done: true, MaxCursor: upto, Width: width}
	for lo := uint64(0); lo < upto; lo += width {
		st.Chunks = append(st.Chunks, lease.Plan{Seq: st.Seq, Lo: lo, Hi: min(lo+width, upto), Targets: int64(min(width, upto-lo))})
		st.Seq++
		st.Added += int64(min(width, upto-lo))
	}
	planned := func(context.Context, *sql.Tx, *model.Broadcast) (*lease.Step, error) { return st, nil }
	if err := f.leases.Submit(f.ctx(), b, planned); err != nil {
		f.t.Fatal(err)
	}
	return b.ID
}

// submit stores a broadcast of audience a as a submit does: planning,
// for a planner to plan after the answer. with, if set, changes the
// broadcast first.
func (f *fixture) submit(a model.Audience, with ...func(*model.Broadcast)) uint64 {
	f.t.Helper()
	b := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "t"}, Audience: a}}
	for _, fn := range with {
		fn(b)
	}
	noPlan := func(context.Context, *sql.Tx, *model.Broadcast) (*lease.Step, error) { return nil, nil }
	if err := f.leases.Submit(f.ctx(), b, noPlan); err != nil {
		f.t.Fatal(err)
	}
	return b.ID
}

// broadcast reads the stored broadcast.
func (f *fixture) broadcast(id uint64) *model.Broadcast {
	f.t.Helper()
	b, err := f.db.Store.GetBroadcast(f.ctx(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// waitFor polls cond every 20 ms until it holds, failing the test after
// wait with what it was waiting for.
func (f *fixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out after %v waiting for %s", wait, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFinal waits for broadcast id to be final and returns it.
func (f *fixture) waitFinal(id uint64) *model.Broadcast {
	f.t.Helper()
	var b *model.Broadcast
	f.waitFor(fmt.Sprintf("broadcast %d final", id), func() bool {
		b = f.broadcast(id)
		return b.Status.Final()
	})
	return b
}

// waitPlanned waits for broadcast id's plan to be stored whole.
func (f *fixture) waitPlanned(id uint64) *model.Broadcast {
	f.t.Helper()
	var b *model.Broadcast
	f.waitFor(fmt.Sprintf("broadcast %d planned", id), func() bool {
		b = f.broadcast(id)
		return !b.Planning || b.Status.Final()
	})
	return b
}

// chunkStatuses reads broadcast id's chunk rows' statuses by seq.
func (f *fixture) chunkStatuses(id uint64) []string {
	f.t.Helper()
	rows, err := f.leases.Chunks(f.ctx(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Status
	}
	return out
}

// querier is a pool or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// invalidatedIn lists which of tokens are invalidated as q sees them,
// with their reasons (no t.Fatal: a checkpoint's goroutine calls it).
func invalidatedIn(ctx context.Context, q querier, tokens []string) (map[string]string, error) {
	out := map[string]string{}
	if len(tokens) == 0 {
		return out, nil
	}
	args := make([]any, len(tokens))
	for i, tk := range tokens {
		args[i] = tk
	}
	rows, err := q.QueryContext(ctx, "SELECT token, COALESCE(invalid_reason, '') FROM device_tokens WHERE invalidated_at IS NOT NULL AND token IN (?"+
		strings.Repeat(", ?", len(tokens)-1)+")", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var tk, reason string
		if err := rows.Scan(&tk, &reason); err != nil {
			return nil, err
		}
		out[tk] = reason
	}
	return out, rows.Err()
}

// invalidated lists which of tokens are invalidated (committed).
func (f *fixture) invalidated(tokens []string) map[string]string {
	f.t.Helper()
	out, err := invalidatedIn(f.ctx(), f.db.SQL, tokens)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// node is one instance's sending side, as broadcast.Service wires it: a
// runner with its own engine (and sender connection to the fake FCM), a
// planner telling it of planned chunks, and the promoter of waiting
// chunks whose instant has come. Stopping it is the instance's two-step
// stop (claiming, then running, with a cause).
type node struct {
	runner  *Runner
	planner *plan.Planner
	engine  *fanout.Engine
	metrics *metricsSpy
	group   *lifecycle.Group

	stopClaiming context.CancelFunc
	stopRunning  context.CancelCauseFunc
	stopped      bool
}

// nodeOptions are what tests change of a node.
type nodeOptions struct {
	lease         time.Duration // 0: a minute
	chunkParallel int           // 0: 1
	// sendTimeout bounds a send (0: wait); a held send ends with it.
	sendTimeout time.Duration
	// invalidated is run.Options.Invalidated.
	invalidated func(ctx context.Context, tx *sql.Tx, broadcastID uint64, dead []webhook.DeadToken) error
	// audiences are the named audiences this node has (none: a
	// broadcast to one is not its to run).
	audiences []audience.Definition
	// failHandedBack fails a broadcast at its first chunk handed back
	// (HandBackTimeout 0; else a minute).
	failHandedBack bool
}

// binder is a node's Bind of named audiences, as broadcast's rules bind
// them: an audience it does not have is an error.
func (f *fixture) binder(defs []audience.Definition) func(model.Audience) (audience.Bound, error) {
	f.t.Helper()
	compiled, err := audience.Compile(defs)
	if err != nil {
		f.t.Fatal(err)
	}
	return func(a model.Audience) (audience.Bound, error) {
		for _, c := range compiled {
			if c.Name() == a.Name {
				return c.BindJSON(a.Params)
			}
		}
		return audience.Bound{}, fmt.Errorf("named audience %q is not configured on this instance", a.Name)
	}
}

// start builds a node as owner with the packages' constructors on f's
// stores and starts it; the test's end stops it.
func (f *fixture) start(owner string, width uint64, o nodeOptions) *node {
	f.t.Helper()
	if o.lease == 0 {
		o.lease = time.Minute
	}
	if o.chunkParallel == 0 {
		o.chunkParallel = 1
	}
	if o.sendTimeout == 0 {
		o.sendTimeout = wait
	}
	log := slog.New(slog.DiscardHandler)
	claiming, stopClaiming := context.WithCancel(context.Background())
	running, stopRunning := context.WithCancelCause(context.Background())
	group := &lifecycle.Group{}
	in := &instance.Instance{
		Owner: owner, Lease: o.lease, DBTimeout: 10 * time.Second, Log: log, Now: time.Now,
		Claiming: claiming, Running: running, Group: group,
	}
	const rate = 100000
	engine, err := fanout.New(fanout.Config{
		Concurrency: 4, PageSize: 10, SendTimeout: o.sendTimeout, MaxAttempts: maxAttempts,
		RetryBaseDelay: time.Millisecond, RetryMaxDelay: 10 * time.Second,
	}, f.fcm, fanout.NewThrottle(rate, 0, 0), log)
	if err != nil {
		f.t.Fatal(err)
	}
	engine.Start(context.Background())
	apps := instance.NewApps(&instance.App{Name: model.DefaultApp, Engine: engine, Store: f.db.Store.ForApp(model.DefaultApp), RateLimit: rate})
	n := &node{engine: engine, metrics: newMetricsSpy(), group: group, stopClaiming: stopClaiming, stopRunning: stopRunning}
	handBack := time.Minute
	if o.failHandedBack {
		handBack = 0
	}
	bind, named := f.binder(o.audiences), audience.NewRunner(f.db.SQL)
	n.runner = New(in, f.db.Store, f.leases, apps, Options{
		FlushInterval: 50 * time.Millisecond, ChunkParallel: o.chunkParallel, PollInterval: 20 * time.Millisecond,
		HandBackTimeout: handBack, RateLimit: rate, Metrics: n.metrics, Invalidated: o.invalidated, Bind: bind, Named: named,
	})
	n.planner = plan.New(in, f.db.Store, f.leases, apps, n.runner, plan.Options{
		ChunkWidth: width, PlanParallel: 1, PlanRetry: time.Second, PollInterval: 20 * time.Millisecond,
		HandBackTimeout: handBack, RateLimit: rate, DefaultZone: time.UTC, Bind: bind, Named: named,
	})
	f.t.Cleanup(func() { n.stop(f.t, ErrShutdown) })
	n.runner.Start()
	n.planner.Start()
	n.planner.Wake()
	// The promoter of broadcast.Service: waiting chunks whose instant
	// has come (by the database's clock) become pending, and the
	// dispatcher is told.
	group.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-claiming.Done():
				return
			case <-t.C:
			}
			c, cancel := context.WithTimeout(claiming, 10*time.Second)
			if promoted, err := f.leases.PromoteWaiting(c, 500); err == nil && promoted > 0 {
				n.runner.Poke()
			}
			cancel()
		}
	})
	return n
}

// stop stops the node with cause (ErrShutdown: each run stores what it
// has and hands its chunk back) and waits for its goroutines and its
// engine. A second stop does nothing.
func (n *node) stop(t *testing.T, cause error) {
	t.Helper()
	if n.stopped {
		return
	}
	n.stopped = true
	n.stopClaiming()
	n.stopRunning(cause)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := n.group.Wait(ctx); err != nil {
		t.Fatalf("the node did not stop: %v", err)
	}
	if err := n.engine.Stop(ctx); err != nil {
		t.Fatalf("the engine did not stop: %v", err)
	}
}

// fakeFCM is the FCM the engines send to, answering by the token's
// prefix as FCM would for such a token, and counting every attempt and
// every accepted send by token:
//
//	unregistered-…  Dead, UNREGISTERED
//	invalid-…       Dead, INVALID_ARGUMENT
//	unavailable-…   Transient, UNAVAILABLE (every attempt)
//	auth-…          Fatal, THIRD_PARTY_AUTH_ERROR (every token would get it)
//	anything else   accepted (validated only, for a dry run)
//
// A held send hangs until release or its send timeout (then it is a
// TIMEOUT, never accepted): a run stopped while sends are in flight.
type fakeFCM struct {
	entered atomic.Int64

	mu        sync.Mutex
	attempts  map[string]int
	accepted  map[string]int
	validated map[string]int       // dry runs' sends that would have been accepted
	first     map[string]time.Time // each token's first attempt

	held    func(n int64, token string) bool // whether the nth send, to token, is held (nil: none)
	release chan struct{}                    // closed: the held sends go on
}

func newFakeFCM() *fakeFCM {
	return &fakeFCM{attempts: map[string]int{}, accepted: map[string]int{}, validated: map[string]int{}, first: map[string]time.Time{}, release: make(chan struct{})}
}

// holdAfter holds every send after the first pass until release.
func (f *fakeFCM) holdAfter(pass int64) {
	f.held = func(n int64, _ string) bool { return n > pass }
}

// holdTokens holds the sends to tokens until release.
func (f *fakeFCM) holdTokens(tokens ...string) {
	f.held = func(_ int64, token string) bool { return slices.Contains(tokens, token) }
}

// releaseHeld lets the held sends, and those to come, go on.
func (f *fakeFCM) releaseHeld() { close(f.release) }

func (f *fakeFCM) Prepare(m *fanout.Message) (fanout.Prepared, error) {
	return &fakeSend{f: f, dryRun: m.DryRun}, nil
}

// fakeSend is a message prepared by fakeFCM.
type fakeSend struct {
	f      *fakeFCM
	dryRun bool
}

func (p *fakeSend) Send(ctx context.Context, token string, _ fanout.Budget) fanout.Outcome {
	f := p.f
	n := f.entered.Add(1)
	f.mu.Lock()
	f.attempts[token]++
	if _, ok := f.first[token]; !ok {
		f.first[token] = time.Now()
	}
	f.mu.Unlock()
	if f.held != nil && f.held(n, token) {
		select {
		case <-f.release:
		case <-ctx.Done():
			return fanout.Outcome{Class: fanout.Transient, Code: fanout.CodeTimeout}
		}
	}
	switch {
	case strings.HasPrefix(token, "unregistered-"):
		return fanout.Outcome{Class: fanout.Dead, Code: "UNREGISTERED"}
	case strings.HasPrefix(token, "invalid-"):
		return fanout.Outcome{Class: fanout.Dead, Code: "INVALID_ARGUMENT"}
	case strings.HasPrefix(token, "unavailable-"):
		return fanout.Outcome{Class: fanout.Transient, Code: "UNAVAILABLE"}
	case strings.HasPrefix(token, "auth-"):
		return fanout.Outcome{Class: fanout.Fatal, Code: "THIRD_PARTY_AUTH_ERROR", Detail: "the credential is refused"}
	}
	f.mu.Lock()
	if p.dryRun {
		f.validated[token]++
	} else {
		f.accepted[token]++
	}
	f.mu.Unlock()
	return fanout.Outcome{Class: fanout.Success}
}

// counts returns copies of the attempts and accepted sends by token.
func (f *fakeFCM) counts() (attempts, accepted map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.attempts), maps.Clone(f.accepted)
}

// firstAttempt is when token was first sent (zero: never).
func (f *fakeFCM) firstAttempt(token string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first[token]
}

// metricsSpy records what the runs report: the sum of the stored
// checkpoints' outcomes, the claims and the finished broadcasts.
type metricsSpy struct {
	mu          sync.Mutex
	succeeded   int64
	canceled    int64
	failed      map[string]int64
	invalidated int64
	claims      map[bool]int // by takeover
	finished    []string     // final statuses
}

func newMetricsSpy() *metricsSpy {
	return &metricsSpy{failed: map[string]int64{}, claims: map[bool]int{}}
}

func (m *metricsSpy) Committed(_ string, succeeded, canceled int64, failed map[string]int64, invalidated int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.succeeded += succeeded
	m.canceled += canceled
	for code, n := range failed {
		m.failed[code] += n
	}
	m.invalidated += invalidated
}

func (m *metricsSpy) BroadcastFinished(_, status, _ string, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.finished = append(m.finished, status)
}

func (m *metricsSpy) ChunkClaimed(takeover bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims[takeover]++
}

func (m *metricsSpy) Capped(string, int64, int64, int64) {}
func (m *metricsSpy) BroadcastRepaired()                 {}
func (m *metricsSpy) CheckpointFailed()                  {}
func (m *metricsSpy) CheckpointTook(time.Duration)       {}
func (m *metricsSpy) WriteBackSkipped(int64)             {}
func (m *metricsSpy) StaleSkipped(string, int)           {}

// committed is the sum of the stored checkpoints' outcomes so far, as
// the broadcast's counters would have them.
func (m *metricsSpy) committed() model.Counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := model.Counts{Succeeded: m.succeeded, Canceled: m.canceled, Invalidated: m.invalidated, Errors: maps.Clone(m.failed)}
	for _, n := range m.failed {
		c.Failed += n
	}
	return c
}

// validatedOf is how many dry runs' sends to token would have been
// accepted.
func (f *fakeFCM) validatedOf(token string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.validated[token]
}
