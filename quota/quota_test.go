package quota_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/fanout"
	"pushfan/internal/platform/sqldb"
	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
	"pushfan/quota"
)

const limit = 9000

// member is one instance's coordinator with a demand the test sets.
type member struct {
	c        *quota.Coordinator
	throttle *fanout.Throttle
	demand   atomic.Uint64 // math.Float64bits
	cancel   context.CancelFunc
}

func (m *member) set(d float64) { m.demand.Store(math.Float64bits(d)) }

func (m *member) share() float64 { s, _ := m.c.Share(); return s }

// join starts a coordinator named name on db; it is stopped (leaving the
// budget) when the test ends unless the test killed it first.
func join(t *testing.T, db *sql.DB, name string) *member { return joinWith(t, db, name, nil) }

// joinWith is join with hook installed in the heartbeat loop (see
// quota.Coordinator.SetTestHook).
func joinWith(t *testing.T, db *sql.DB, name string, hook func(ctx context.Context, stage string)) *member {
	t.Helper()
	m := &member{throttle: fanout.NewThrottle(limit, 0, time.Minute)}
	// Its warnings (a failed heartbeat, a rejoin) go to the test's output.
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})).With("member", name)
	m.c = quota.New(db, log, m.throttle, func() float64 { return math.Float64frombits(m.demand.Load()) }, quota.Options{
		Project: "p", Instance: name, Limit: limit,
		Interval: 50 * time.Millisecond, Stale: 300 * time.Millisecond,
	})
	if hook != nil {
		m.c.SetTestHook(hook)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.c.Start(ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.c.Stop(ctx); err != nil {
			t.Errorf("stopping %s: %v", name, err)
		}
	})
	return m
}

func waitShare(t *testing.T, what string, m *member, want float64) time.Duration {
	t.Helper()
	start := time.Now()
	teststack.WaitEvery(t, fmt.Sprintf("%s: share %.1f (has %.1f)", what, want, m.share()), 5*time.Second, 5*time.Millisecond, func() bool {
		return math.Abs(m.share()-want) < 0.01
	})
	return time.Since(start)
}

func TestSendingMembersSplitTheLimitAndRebalance(t *testing.T) {
	db := testdb.New(t).SQL.DB
	a, b, c := join(t, db, "a"), join(t, db, "b"), join(t, db, "c")

	// Idle, each holds the trickle, for its first sends.
	for _, m := range []*member{a, b, c} {
		waitShare(t, "idle", m, limit*0.01)
	}
	// Two send: they split the limit; the idle one keeps a third.
	a.set(math.Inf(1))
	b.set(math.Inf(1))
	waitShare(t, "a with b sending", a, limit/2)
	waitShare(t, "b with a sending", b, limit/2)
	// The idle one keeps the trickle (waited for: on a loaded machine one
	// of its heartbeats may time out, and it holds its sends, share 0,
	// until the next gets through).
	waitShare(t, "idle c with a and b sending", c, limit*0.01)
	if got := a.throttle.Limit(); got != limit/2 {
		t.Fatalf("a's throttle at %.1f, want its share %.1f", got, float64(limit)/2)
	}
	// c paces a broadcast at 1,000/s: it takes that (and 5% room); a and b
	// split the rest.
	c.set(1000)
	waitShare(t, "paced c", c, 1050)
	waitShare(t, "a beside paced c", a, (limit-1050)/2)

	// b dies (no goodbye): after Stale the others take its share.
	b.cancel()
	took := waitShare(t, "a after b died", a, limit-1050)
	t.Logf("a took up dead b's share %v after b's last heartbeat (stale after 300ms, interval 50ms)", took.Round(time.Millisecond))

	// c stops (a goodbye): a gets everything at its next heartbeats.
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.c.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	took = waitShare(t, "a alone", a, limit)
	t.Logf("a took up stopped c's share after %v", took.Round(time.Millisecond))
}

// The parts never add up to more than the limit, however members join:
// two starting at once each take the limit over the live members, and one
// joining senders trickles until they have made room.
func TestJoinsNeverOvercommitTheLimit(t *testing.T) {
	db := testdb.New(t).SQL.DB
	ms := []*member{join(t, db, "a"), join(t, db, "b"), join(t, db, "c")}
	for _, m := range ms {
		waitShare(t, "idle", m, limit*0.01)
	}
	var highest atomic.Uint64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			var sum float64 // the parts of the split; trickles are outside it
			for _, m := range ms {
				if sh := m.share(); sh > limit*0.01+0.01 {
					sum += sh
				}
			}
			if sum > math.Float64frombits(highest.Load()) {
				highest.Store(math.Float64bits(sum))
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	// a and b start at the same moment, with nobody sending.
	ms[0].set(math.Inf(1))
	ms[1].set(math.Inf(1))
	waitShare(t, "a beside b", ms[0], limit/2)
	waitShare(t, "b beside a", ms[1], limit/2)
	// c joins them: it trickles first.
	ms[2].set(math.Inf(1))
	waitShare(t, "c joining", ms[2], limit*0.01)
	took := waitShare(t, "c after the join wait", ms[2], limit/3)
	waitShare(t, "a beside b and c", ms[0], limit/3)
	// c paces a broadcast at 300/s (it falls to that at once), then starts
	// a bulk send beside it: it waits for the others to make room again.
	ms[2].set(300)
	waitShare(t, "c paced", ms[2], 315)
	waitShare(t, "a beside paced c", ms[0], (limit-315.0)/2)
	ms[2].set(math.Inf(1))
	waitShare(t, "c sending bulk too", ms[2], limit/3)
	close(stop)
	<-watched
	if h := math.Float64frombits(highest.Load()); h > limit+0.01 {
		t.Fatalf("the three shares added up to %.1f/s at one moment, over the limit %d", h, limit)
	}
	t.Logf("c took its part %v after trickling (join wait 75ms, interval 50ms)", took.Round(time.Millisecond))
}

func TestA429PausesEveryInstance(t *testing.T) {
	db := testdb.New(t).SQL.DB
	a, b := join(t, db, "a"), join(t, db, "b")
	a.set(math.Inf(1))
	b.set(math.Inf(1))
	waitShare(t, "a sending", a, limit/2)

	// a gets a 429 with a 2 s Retry-After.
	start := time.Now()
	a.throttle.Pause(start.Add(2 * time.Second))
	teststack.WaitEvery(t, "b to pause on a's 429", time.Second, 5*time.Millisecond, func() bool { return !permit(b.throttle) })
	t.Logf("b paused %v after a's 429", time.Since(start).Round(time.Millisecond))
	// Both resume when the pause ends.
	teststack.WaitEvery(t, "b to resume after the pause", 4*time.Second, 20*time.Millisecond, func() bool { return permit(b.throttle) })
	if resumed := time.Since(start); resumed < 1900*time.Millisecond {
		t.Fatalf("b resumed %v after a 2 s pause", resumed)
	}
}

func TestAnInstanceCutOffFromTheDatabaseHolds(t *testing.T) {
	tdb := testdb.New(t)
	proxy := teststack.NewProxy(t, "127.0.0.1:3306")
	pool, err := sqldb.Open(context.Background(), proxy.DSN(tdb.DSN), 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	a := join(t, pool.DB, "a")
	a.set(math.Inf(1))
	waitShare(t, "a sending", a, limit)
	if !permit(a.throttle) {
		t.Fatal("a cannot send before the cut")
	}
	proxy.Cut()
	// Within Stale its last share holds; after it, the others would have
	// counted it out, so it holds its sends.
	teststack.WaitEvery(t, "a to hold after losing the database", 2*time.Second, 10*time.Millisecond, func() bool { return !permit(a.throttle) })
	proxy.Restore()
	teststack.WaitEvery(t, "a to send again once a heartbeat gets through", 5*time.Second, 20*time.Millisecond, func() bool { return permit(a.throttle) })
}

// permit reports whether t gives a permit within 30 ms.
func permit(t *fanout.Throttle) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	return t.Wait(ctx) == nil
}

// stall stops a coordinator's heartbeat loop at one stage of a beat, once
// each time it is armed, until released: the process stopped there (a VM
// paused, SIGSTOP, a long GC).
type stall struct {
	stage   string
	armed   atomic.Bool
	entered chan struct{} // the loop has stopped
	release chan struct{}
}

func newStall(stage string) *stall {
	return &stall{stage: stage, entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (s *stall) hook(ctx context.Context, stage string) {
	if stage != s.stage || !s.armed.CompareAndSwap(true, false) {
		return
	}
	s.entered <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
	}
}

// highest samples the members' shares every millisecond, in the order
// given, until the returned function is called, which returns the highest
// sum of the parts of the split (trickles are outside it; a member that
// holds its sends has none). List a member that stops holding before one
// that takes its share, so a sample never straddles the hand-over.
func highest(ms ...*member) (stop func() float64) {
	var top atomic.Uint64
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			var sum float64
			for _, m := range ms {
				if sh := m.share(); sh > limit*0.01+0.01 {
					sum += sh
				}
			}
			if sum > math.Float64frombits(top.Load()) {
				top.Store(math.Float64bits(sum))
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() float64 {
		close(done)
		<-watched
		return math.Float64frombits(top.Load())
	}
}

// shares records every share a member takes (OnShare).
type shares struct {
	mu  sync.Mutex
	got []float64
}

func (s *shares) record(perSecond float64, _ int) {
	s.mu.Lock()
	s.got = append(s.got, perSecond)
	s.mu.Unlock()
}

func (s *shares) reset() {
	s.mu.Lock()
	s.got = nil
	s.mu.Unlock()
}

// firstAbove is the first recorded share above floor, or -1.
func (s *shares) firstAbove(floor float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.got {
		if v > floor {
			return v
		}
	}
	return -1
}

// A member stopped past Stale (a VM paused, SIGSTOP, a long GC) has been
// counted out and its share taken by the others: by its own clock its
// throttle stops giving permits when that can happen, and once it runs
// again it joins like a new member (the trickle, then its part when the
// others have made room), never taking its old share at once. Stopped
// before a beat, and in one between its read and its share.
func TestAMemberStalledPastStaleHoldsAndJoinsAgain(t *testing.T) {
	for _, stage := range []string{"beat", "apply"} {
		t.Run("at "+stage, func(t *testing.T) {
			db := testdb.New(t).SQL.DB
			st := newStall(stage)
			a, b := joinWith(t, db, "a", st.hook), join(t, db, "b")
			a.set(math.Inf(1))
			b.set(math.Inf(1))
			waitShare(t, "a beside b", a, limit/2)
			waitShare(t, "b beside a", b, limit/2)
			top := highest(a, b)

			st.armed.Store(true)
			teststack.Receive(t, "a's heartbeat loop to stop at "+stage, 2*time.Second, st.entered)
			waitShare(t, "b with stalled a counted out", b, limit)
			if permit(a.throttle) {
				t.Fatalf("a's throttle gives permits at %.1f/s while b, having counted a out, takes the whole limit", a.throttle.Limit())
			}
			if s := a.share(); s != 0 {
				t.Fatalf("stalled a reports a share of %.1f/s, want 0 (holding)", s)
			}

			var took shares
			a.c.OnShare(took.record)
			took.reset() // OnShare told it the share now; what matters is what follows
			close(st.release)
			waitShare(t, "a joined again beside b", a, limit/2)
			waitShare(t, "b beside a again", b, limit/2)
			if first := took.firstAbove(0); first != limit*0.01 {
				t.Fatalf("a's first share after the stall was %.1f/s, want the trickle %.1f/s (it joins again)", first, float64(limit)*0.01)
			}
			if h := top(); h > limit+0.01 {
				t.Fatalf("the shares added up to %.1f/s at one moment, over the limit %d", h, limit)
			}
		})
	}
}

// A burst of 429s while the heartbeat loop is busy loses none of their
// pauses: the longest is the one the cluster pauses for.
func TestABurstOf429sPublishesTheLongestPause(t *testing.T) {
	db := testdb.New(t).SQL.DB
	st := newStall("beat")
	a := joinWith(t, db, "a", st.hook)
	st.armed.Store(true)
	teststack.Receive(t, "a's heartbeat loop to stop", 2*time.Second, st.entered)
	start := time.Now()
	for i := range 40 {
		a.throttle.Pause(start.Add(time.Second + time.Duration(i)*time.Millisecond))
	}
	a.throttle.Pause(start.Add(time.Minute))
	close(st.release)
	var left time.Duration
	teststack.WaitEvery(t, "the minute's pause in budget_pauses (not one of the 1 s ones)", 5*time.Second, 10*time.Millisecond, func() bool {
		left = pauseLeft(t, db)
		return left > 50*time.Second
	})
	if left > time.Minute {
		t.Fatalf("the published pause has %v left, more than the 429's minute", left)
	}
}

// pauseLeft is how long the project's published pause has left by the
// database's clock (0: none).
func pauseLeft(t *testing.T, db *sql.DB) time.Duration {
	t.Helper()
	var micros int64
	err := db.QueryRow(`SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), paused_until) FROM budget_pauses WHERE project = 'p'`).Scan(&micros)
	if errors.Is(err, sql.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(micros) * time.Microsecond
}

// A member whose heartbeats get written but whose reads time out stays
// counted in (its row is fresh) and never certifies a share: a joiner
// still takes its part, within Stale of its join, because by then that
// member holds its sends by its own clock.
func TestAJoinerRisesBesideAMemberWhoseReadsTimeOut(t *testing.T) {
	db := testdb.New(t).SQL.DB
	var failReads atomic.Bool
	a := joinWith(t, db, "a", func(ctx context.Context, stage string) {
		if stage == "read" && failReads.Load() {
			<-ctx.Done() // the reads run out of the beat's time
		}
	})
	b := join(t, db, "b")
	a.set(math.Inf(1))
	waitShare(t, "a alone", a, limit)

	failReads.Store(true)
	teststack.WaitEvery(t, "a to hold while its reads time out", 2*time.Second, 10*time.Millisecond, func() bool { return !permit(a.throttle) })
	top := highest(a, b)
	b.set(math.Inf(1))
	took := waitShare(t, "b's part beside a, whose reads time out", b, limit/2)
	t.Logf("b took its part %v after it began sending (stale after 300ms)", took.Round(time.Millisecond))
	if permit(a.throttle) {
		t.Fatal("a gives permits while its reads time out")
	}

	failReads.Store(false)
	waitShare(t, "a joined again once its reads get through", a, limit/2)
	waitShare(t, "b beside a", b, limit/2)
	if h := top(); h > limit+0.01 {
		t.Fatalf("the shares added up to %.1f/s at one moment, over the limit %d", h, limit)
	}
}

// A member whose demand falls lowers its share before it stores the lower
// demand: the others take up what it leaves as soon as they read it, even
// while its own beat is still reading.
func TestAFallingDemandLowersTheShareBeforeTheOthersSeeIt(t *testing.T) {
	db := testdb.New(t).SQL.DB
	// c's first beat that stores the paced demand stops after its write.
	st := newStall("read")
	var paced atomic.Bool // set once c's demand is 300
	var once sync.Once
	c := joinWith(t, db, "c", func(ctx context.Context, stage string) {
		if stage == "beat" && paced.Load() {
			once.Do(func() { st.armed.Store(true) }) // this beat stores 300
		}
		st.hook(ctx, stage)
	})
	a, b := join(t, db, "a"), join(t, db, "b")
	for _, m := range []*member{a, b, c} {
		m.set(math.Inf(1))
	}
	for _, m := range []*member{a, b, c} {
		waitShare(t, "three sending", m, limit/3)
	}
	top := highest(c, a, b)
	c.set(300)
	paced.Store(true)
	teststack.Receive(t, "c's beat storing its paced demand to stop after its write", 2*time.Second, st.entered)
	waitShare(t, "a taking up what paced c leaves", a, (limit-315.0)/2)
	if s := c.share(); s > 315.01 {
		t.Fatalf("c still has %.1f/s while a, having read c's paced demand, takes %.1f/s", s, a.share())
	}
	close(st.release)
	waitShare(t, "c paced", c, 315)
	waitShare(t, "b beside paced c", b, (limit-315.0)/2)
	if h := top(); h > limit+0.01 {
		t.Fatalf("the shares added up to %.1f/s at one moment, over the limit %d", h, limit)
	}
}

// An instance that starts sending with nobody else sending gets the bucket
// its idle gave it (fanout.Throttle.Fill), not the trickle's nearly empty
// one: the first second of a broadcast on an idle cluster runs at the
// rate.
func TestALoneJoinStartsWithAFullBucket(t *testing.T) {
	db := testdb.New(t).SQL.DB
	a := join(t, db, "a")
	waitShare(t, "idle", a, limit*0.01)
	a.set(math.Inf(1))
	waitShare(t, "a alone", a, limit)
	start := time.Now()
	free := 0
	for free < limit {
		waited, _ := a.throttle.PermitWaits()
		if err := a.throttle.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if w, _ := a.throttle.PermitWaits(); w > waited {
			break
		}
		free++
	}
	// The burst is 100 ms of the limit (900); it was idle an Interval (50
	// ms here) at least, which gives 450 of it. A bucket refilling from the
	// trickle's holds only what the time since the raise gave it.
	want := int(min(limit/10, limit*0.05))
	refill := int(limit * time.Since(start).Seconds())
	if free < want-refill-10 {
		t.Fatalf("%d permits without waiting after a lone join (%v after the raise), want the %d its idle gave", free, time.Since(start).Round(time.Millisecond), want)
	}
}
