package plan

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"pushfan/broadcast/instance"
	"pushfan/internal/platform/lifecycle"
	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/model"
)

// wait bounds every wait of these tests: a plan of tens of thousands of
// targets takes a second or two, under the race detector too.
const wait = time.Minute

// fixture is a test database with an audience in it, and the parts a
// planner is built from on it: the repository's Store, the lease store,
// the apps (one, reading the database's tokens).
type fixture struct {
	t      *testing.T
	db     *testdb.DB
	leases *lease.Store
	apps   *instance.Apps
	now    time.Time // every instance's clock
}

func newFixture(t *testing.T, now time.Time) *fixture {
	t.Helper()
	db := testdb.New(t)
	return &fixture{
		t: t, db: db, leases: lease.New(db.SQL.DB, slog.New(slog.DiscardHandler)),
		// The planner asks an app only for its Store; no engine sends here.
		apps: instance.NewApps(&instance.App{Name: model.DefaultApp, Store: db.Store.ForApp(model.DefaultApp)}),
		now:  now,
	}
}

func (f *fixture) ctx() context.Context {
	c, cancel := context.WithTimeout(f.t.Context(), wait)
	f.t.Cleanup(cancel)
	return c
}

// user is one row of the audience: user id and token id are both id.
type user struct {
	id      uint64
	zone    string // "" for NULL
	invalid bool   // the token is invalidated: never a target
	off     bool   // the user turned pushes off: never a target
}

func (u user) target() bool { return !u.invalid && !u.off }

// seed stores users and one token each, a few thousand rows a statement.
func (f *fixture) seed(users []user) {
	f.t.Helper()
	const batch = 5000
	for lo := 0; lo < len(users); lo += batch {
		part := users[lo:min(lo+batch, len(users))]
		var us, ts []string
		var uargs, targs []any
		for _, u := range part {
			var zone any
			if u.zone != "" {
				zone = u.zone
			}
			us = append(us, "(?, ?, ?)")
			uargs = append(uargs, u.id, !u.off, zone)
			var invalidated any
			if u.invalid {
				invalidated = f.now
			}
			ts = append(ts, "(?, ?, ?, ?)")
			targs = append(targs, u.id, u.id, fmt.Sprintf("token-%d", u.id), invalidated)
		}
		if _, err := f.db.SQL.ExecContext(f.ctx(), "INSERT INTO users (id, push_enabled, timezone) VALUES "+strings.Join(us, ", "), uargs...); err != nil {
			f.t.Fatal(err)
		}
		if _, err := f.db.SQL.ExecContext(f.ctx(), "INSERT INTO device_tokens (id, user_id, token, invalidated_at) VALUES "+strings.Join(ts, ", "), targs...); err != nil {
			f.t.Fatal(err)
		}
	}
}

// targets is the ids of users' targets, ascending (users are).
func targets(users []user) []uint64 {
	var out []uint64
	for _, u := range users {
		if u.target() {
			out = append(out, u.id)
		}
	}
	return out
}

// submit stores a broadcast of audience a as a submit does (one planned
// after the answer, by a planner).
func (f *fixture) submit(a model.Audience) uint64 {
	f.t.Helper()
	b := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "t"}, Audience: a}}
	noPlan := func(context.Context, *sql.Tx, *model.Broadcast) (*lease.Step, error) { return nil, nil }
	if err := f.leases.Submit(f.ctx(), b, noPlan); err != nil {
		f.t.Fatal(err)
	}
	if b.Status != model.StatusPlanning {
		f.t.Fatalf("submitted: status %s, want planning", b.Status)
	}
	return b.ID
}

// planInstance is one instance's planner, with a record of what it told
// the sending side.
type planInstance struct {
	p     *Planner
	runs  *runsSpy
	group *lifecycle.Group
	stop  func() // the instance's two-step stop (claiming, then running)
}

// start builds a planner with the package's constructor on f's stores,
// as instance owner, and starts it. changed (nil: nothing) is told of
// every stored step, in the plan's own goroutine.
func (f *fixture) start(owner string, width uint64, changed func(pi *planInstance, id uint64)) *planInstance {
	f.t.Helper()
	claiming, stopClaiming := context.WithCancel(context.Background())
	running, stopRunning := context.WithCancel(context.Background())
	group := &lifecycle.Group{}
	in := &instance.Instance{
		Owner: owner, Lease: time.Minute, DBTimeout: 10 * time.Second, Log: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return f.now }, Claiming: claiming, Running: running, Group: group,
	}
	pi := &planInstance{
		runs:  &runsSpy{finished: make(chan uint64, 8), failed: make(chan string, 8)},
		group: group, stop: func() { stopClaiming(); stopRunning() },
	}
	var onStep func(uint64)
	if changed != nil {
		onStep = func(id uint64) { changed(pi, id) }
	}
	pi.p = New(in, f.db.Store, f.leases, f.apps, pi.runs, Options{
		ChunkWidth: width, PlanParallel: 2, PlanRetry: time.Second, PollInterval: 50 * time.Millisecond,
		HandBackTimeout: time.Minute, RateLimit: 1000, DefaultZone: time.UTC, Changed: onStep,
	})
	pi.p.load = idle{} // nothing sends beside the plans: they never rest
	f.t.Cleanup(func() { pi.halt(f.t) })
	pi.p.Start()
	pi.p.Wake()
	return pi
}

// halt stops the instance and waits for its goroutines.
func (pi *planInstance) halt(t *testing.T) {
	t.Helper()
	pi.stop()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := pi.group.Wait(ctx); err != nil {
		t.Fatalf("the planner did not stop: %v", err)
	}
}

// finished waits for the planner to have told the sending side that each
// of ids is planned (Runs.Finish), and fails on a failed plan.
func (pi *planInstance) finished(t *testing.T, ids ...uint64) {
	t.Helper()
	want := map[uint64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.After(wait)
	for len(want) > 0 {
		select {
		case id := <-pi.runs.finished:
			if !want[id] {
				t.Fatalf("finished broadcast %d, waiting for %v", id, want)
			}
			delete(want, id)
		case msg := <-pi.runs.failed:
			t.Fatalf("a plan failed: %s", msg)
		case <-deadline:
			t.Fatalf("no plan finished within %v: waiting for %v", wait, want)
		}
	}
}

// runsSpy is the sending side as the planner sees it (run.Runner's
// part), recording what it is told.
type runsSpy struct {
	mu       sync.Mutex
	pokes    int
	finished chan uint64
	failed   chan string
}

func (r *runsSpy) Poke() {
	r.mu.Lock()
	r.pokes++
	r.mu.Unlock()
}
func (r *runsSpy) Finish(_ context.Context, id uint64) { r.finished <- id }
func (r *runsSpy) Fail(_ context.Context, id uint64, msg string) {
	r.failed <- fmt.Sprintf("broadcast %d: %s", id, msg)
}
func (r *runsSpy) Refuse(uint64)     {}
func (r *runsSpy) Refused() []uint64 { return nil }

// idle is an instance that sends nothing.
type idle struct{}

func (idle) Busy() bool                           { return false }
func (idle) PermitWaits() (waited, permits int64) { return 0, 0 }
func (idle) Demand() float64                      { return 0 }

// chunk is one stored chunk row.
type chunk struct {
	Seq       int
	Lo, Hi    uint64
	Targets   int64
	NotBefore time.Time // zero: due now
	Status    string
	IDs       []uint64 // its target list (local delivery); nil for a range
}

// chunks reads broadcast id's chunks by seq.
func (f *fixture) chunks(id uint64) []chunk {
	f.t.Helper()
	rows, err := f.db.SQL.QueryContext(f.ctx(), `SELECT seq, lo_id, hi_id, COALESCE(targets, 0), not_before, status, target_ids
		FROM broadcast_chunks WHERE broadcast_id = ? ORDER BY seq`, id)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []chunk
	for rows.Next() {
		var c chunk
		var nb sql.NullTime
		var raw []byte
		if err := rows.Scan(&c.Seq, &c.Lo, &c.Hi, &c.Targets, &nb, &c.Status, &raw); err != nil {
			f.t.Fatal(err)
		}
		if nb.Valid {
			c.NotBefore = nb.Time.UTC()
		}
		c.IDs = decodeTargets(f.t, c.Lo, raw)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// decodeTargets reads a chunk's stored target list: each id as the
// uvarint of its gap from the one before (the first's from lo), as
// package lease writes it.
func decodeTargets(t *testing.T, lo uint64, b []byte) []uint64 {
	t.Helper()
	var out []uint64
	for prev := lo; len(b) > 0; {
		gap, k := binary.Uvarint(b)
		if k <= 0 || gap == 0 {
			t.Fatalf("a corrupt target list after %d", prev)
		}
		prev += gap
		out = append(out, prev)
		b = b[k:]
	}
	return out
}

// firstDiff describes where two chunk lists first differ, without their
// target lists in full (thousands of ids).
func firstDiff(got, want []chunk) string {
	short := func(c chunk) string {
		return fmt.Sprintf("{seq %d (%d, %d] %d targets not before %v %s, %d ids}", c.Seq, c.Lo, c.Hi, c.Targets, c.NotBefore, c.Status, len(c.IDs))
	}
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			return fmt.Sprintf("chunk %d: got %s, want %s", i, short(got[i]), short(want[i]))
		}
	}
	return fmt.Sprintf("%d chunks, want %d", len(got), len(want))
}

// planRow is a broadcast's plan state and counts, as stored.
type planRow struct {
	Status                           string
	Planning                         bool
	Cursor                           uint64
	Seq                              int
	Epoch                            uint64
	MaxTokenID, Width                uint64
	Targeted, Deferred, ZoneFallback int64
	Canceled                         int64
}

func (f *fixture) plan(id uint64) planRow {
	f.t.Helper()
	var r planRow
	err := f.db.SQL.QueryRowContext(f.ctx(), `SELECT status, planning, plan_cursor, plan_seq, plan_epoch, max_token_id, plan_width,
			targeted, deferred, zone_fallbacks, canceled FROM broadcasts WHERE id = ?`, id).
		Scan(&r.Status, &r.Planning, &r.Cursor, &r.Seq, &r.Epoch, &r.MaxTokenID, &r.Width, &r.Targeted, &r.Deferred, &r.ZoneFallback, &r.Canceled)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}
