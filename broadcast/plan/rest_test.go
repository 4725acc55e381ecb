package plan

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/lease"
)

// sends is a Load whose permits advance at a rate of its own, as a
// throttle's counters do under sends at that rate (a fake of the
// planner's own view of the engine: the sends' numbers, not a database).
type sends struct {
	demand  float64 // what the sends ask for (+Inf: an unpaced one runs)
	perSec  float64 // the permits they get
	waitFor bool    // whether those permits waited for the rate limit
	start   time.Time
	reads   atomic.Int64
}

func (f *sends) Busy() bool      { return true }
func (f *sends) Demand() float64 { return f.demand }
func (f *sends) PermitWaits() (waited, permits int64) {
	f.reads.Add(1)
	p := int64(f.perSec * time.Since(f.start).Seconds())
	if f.waitFor {
		return p, p
	}
	return 0, p
}

// A plan yields to sends that need the CPU and never to sends held by
// their pace: beside a broadcast paced at 50/s that keeps its pace, a step
// is followed by the next at once; beside an unpaced send that gets fewer
// permits than its rate limit, or paced ones far below their paces, it
// rests planYield times its step.
func TestAPlanRestsForSendsThatNeedTheCPUNeverForAPace(t *testing.T) {
	const step = 100 * time.Millisecond
	ahead := &lease.PlanClaim{Targeted: 1_000_000} // far ahead of its sends
	for _, c := range []struct {
		name  string
		load  *sends
		rests bool
	}{
		{"a pace of 50/s kept", &sends{demand: 50, perSec: 50}, false},
		{"a pace of 1/s kept", &sends{demand: 1, perSec: 1}, false},
		{"paces of 9,000/s kept", &sends{demand: 9000, perSec: 9000}, false},
		{"paces of 9,000/s at a tenth", &sends{demand: 9000, perSec: 900}, true},
		{"an unpaced send held by the rate limit", &sends{demand: math.Inf(1), perSec: 2000, waitFor: true}, false},
		{"an unpaced send short of the rate limit", &sends{demand: math.Inf(1), perSec: 2000}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.load.start = time.Now().Add(-time.Second)
			s := &Planner{load: c.load, opt: Options{RateLimit: 2000}}
			before := s.mark()
			time.Sleep(step) // the step
			t0 := time.Now()
			if err := s.rest(t.Context(), ahead, step, before, planRestMax); err != nil {
				t.Fatal(err)
			}
			rested := time.Since(t0)
			// planYield × step is 900 ms; a pass through is a read or two.
			if c.rests && rested < planYield*step*8/10 {
				t.Fatalf("rested %v: want about %v (the sends need the CPU)", rested, planYield*step)
			}
			if !c.rests && rested > planYield*step/2 {
				t.Fatalf("rested %v: want no rest (the sends get their rate)", rested)
			}
			t.Logf("rested %v after %d reads of the permits", rested.Round(time.Millisecond), c.load.reads.Load())
		})
	}
}

// A plan's rests are bounded in all (planRestMax): beside sends that would
// have it rest planYield × its step, a plan with less left of its rests
// rests only that, and one that used them up does not rest, so that its
// exact targeted comes within a bound whatever runs beside it.
func TestAPlanRestsNoLongerThanWhatIsLeftOfItsRests(t *testing.T) {
	const step = 100 * time.Millisecond
	ahead := &lease.PlanClaim{Targeted: 1_000_000}
	for _, c := range []struct {
		left     time.Duration
		min, max time.Duration
	}{
		{planRestMax, planYield * step * 8 / 10, 2 * planYield * step},
		{200 * time.Millisecond, 150 * time.Millisecond, 800 * time.Millisecond}, // 900 ms if the bound were not kept
		{0, 0, 400 * time.Millisecond},
		{-time.Second, 0, 400 * time.Millisecond},
	} {
		load := &sends{demand: math.Inf(1), perSec: 2000, start: time.Now().Add(-time.Second)} // short of the rate limit
		s := &Planner{load: load, opt: Options{RateLimit: 2000}}
		before := s.mark()
		time.Sleep(step)
		t0 := time.Now()
		if err := s.rest(t.Context(), ahead, step, before, c.left); err != nil {
			t.Fatal(err)
		}
		if rested := time.Since(t0); rested < c.min || rested > c.max {
			t.Errorf("with %v of its rests left: rested %v, want %v to %v", c.left, rested.Round(time.Millisecond), c.min, c.max)
		}
	}
}
