package quota_test

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/fanout"
	"pushfan/internal/sqldb"
	"pushfan/internal/testdb"
	"pushfan/internal/teststack"
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
func join(t *testing.T, db *sql.DB, name string) *member {
	t.Helper()
	m := &member{throttle: fanout.NewThrottle(limit, 0, time.Minute)}
	m.c = quota.New(db, nil, m.throttle, func() float64 { return math.Float64frombits(m.demand.Load()) }, quota.Options{
		Project: "p", Instance: name, Limit: limit,
		Interval: 50 * time.Millisecond, Stale: 300 * time.Millisecond,
	})
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
	if s := c.share(); s != limit*0.01 {
		t.Fatalf("idle c has %.1f, want the trickle %.1f", s, float64(limit)*0.01)
	}
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
