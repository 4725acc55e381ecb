package fanout

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// pool is the engine's workers, shared by every Run: an urgent queue
// (transactional broadcasts' targets, taken first) and a bulk queue, and as
// many workers as reaching the rate needs.
//
// Sends in flight are the rate times the round trip (Little's law): 512
// workers carry at most 512 / latency sends a second, short of the budget
// once FCM answers in 100–300 ms, while thousands of workers at 10 ms only
// mean thousands of connections a burst can open. So a controller sizes the
// pool every controlInterval from the rate the throttle allows (its share,
// not a ramp's momentary rate) and the latency the sends see, with
// headroom, within [minWorkers, Concurrency]: the configured concurrency is
// a ceiling, which also bounds memory and connections.
//
// The pool starts small (sized for assumedLatency). Latency is only known
// once sends complete, and at 300 ms none has in the first interval: an
// interval with sends in flight and none ended doubles the estimate.
// (Growing on "every worker busy" instead runs away when sends are slow for
// a reason more workers do not cure, such as connections being set up.)
type pool struct {
	urgent, bulk chan item
	quit         chan struct{} // closed by Stop, once every Run returned
	workers      sync.WaitGroup
	live         atomic.Int64 // workers running
	busy         atomic.Int64 // sends in flight
	target       atomic.Int64 // workers wanted
	peak         atomic.Int64 // most workers at once, for the bench
	// The sends that ended since the controller last looked, and the
	// durations of the first len(samples) of them.
	sends   atomic.Int64
	samples [256]atomic.Int64
	latency time.Duration // smoothed; the controller's own
	quiet   int           // intervals in a row with sends in flight and none ended
	trim    chan struct{} // wakes idle workers above the target to leave
}

const (
	controlInterval = 100 * time.Millisecond
	minWorkers      = 16
	// headroom over rate × latency: latency varies send to send, and a
	// short stall should not leave the rate unreached.
	headroom = 1.25
	// assumedLatency sizes the pool before any send has been timed.
	assumedLatency = 20 * time.Millisecond
)

func newPool(pageSize int) *pool {
	return &pool{
		urgent: make(chan item, pageSize), bulk: make(chan item, pageSize),
		quit: make(chan struct{}), latency: assumedLatency, trim: make(chan struct{}, 256),
	}
}

// want is the worker count for rate (messages per second) at latency.
func want(rate float64, latency time.Duration, ceiling int) int {
	n := int(math.Ceil(rate*latency.Seconds()*headroom)) + minWorkers
	return min(max(n, minWorkers), ceiling)
}

// next returns the next item, urgent first; ok is false once the pool
// quits, or when the controller asks an idle worker to leave (trim, the
// worker then checks shrink). Not inlined: its select's temporaries would
// sit in the worker's frame through every send.
//
//go:noinline
func (p *pool) next() (it item, ok, trimmed bool) {
	select {
	case it := <-p.urgent:
		return it, true, false
	default:
	}
	select {
	case it := <-p.urgent:
		return it, true, false
	case it := <-p.bulk:
		return it, true, false
	case <-p.trim:
		return item{}, false, true
	case <-p.quit:
		return item{}, false, false
	}
}

// shrink lets one worker go when there are more than wanted.
func (p *pool) shrink() bool {
	for {
		n := p.live.Load()
		if n <= p.target.Load() || n <= minWorkers {
			return false
		}
		if p.live.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// timed records one send's duration for the controller.
func (p *pool) timed(d time.Duration) {
	if i := p.sends.Add(1) - 1; i < int64(len(p.samples)) {
		p.samples[i].Store(int64(d))
	}
}

// median is the median duration of the first n samples (n ≤ len).
func (p *pool) median(n int) time.Duration {
	ds := make([]int64, n)
	for i := range ds {
		ds[i] = p.samples[i].Load()
	}
	slices.Sort(ds)
	return time.Duration(ds[n/2])
}

// grow starts workers up to the target.
func (e *Engine) grow(p *pool) {
	for {
		n := p.live.Load()
		if n >= p.target.Load() {
			return
		}
		if p.live.CompareAndSwap(n, n+1) {
			if n+1 > p.peak.Load() {
				p.peak.Store(n + 1)
			}
			p.workers.Go(func() { e.worker(p) })
		}
	}
}

// control resizes the pool every controlInterval until it quits.
func (e *Engine) control(p *pool) {
	t := time.NewTicker(controlInterval)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
		case <-e.throttle.changed: // a new share: size for it now
		}
		switch n := p.sends.Swap(0); {
		case n > 0:
			// The median: the first sends of a burst also wait for their
			// connections to be set up, and the mean would grow the pool
			// for a wait that more workers only lengthen.
			med := p.median(int(min(n, int64(len(p.samples)))))
			p.latency = min((p.latency+med)/2, 2*p.latency)
			p.quiet = 0
		case p.busy.Load() > 0:
			// Sends in flight and none ended for longer than the estimate:
			// the round trip is longer, at least twice it. Doubling finds
			// 300 ms in three intervals. (At a few sends a second, quiet
			// intervals shorter than the estimate are just gaps.)
			if p.quiet++; time.Duration(p.quiet)*controlInterval > p.latency {
				p.latency = max(2*p.latency, controlInterval)
			}
		default:
			p.quiet = 0
		}
		p.latency = min(max(p.latency, time.Millisecond), e.cfg.SendTimeout) // nothing waits longer
		// At most twice the workers of the last interval.
		live := int(p.live.Load())
		target := min(want(e.throttle.Limit(), p.latency, e.cfg.Concurrency), max(2*live, minWorkers))
		p.target.Store(int64(target))
		e.grow(p)
		// Idle workers above the target are woken to leave (busy ones
		// leave after their send).
		for range max(live-target, 0) {
			select {
			case p.trim <- struct{}{}:
			default:
			}
		}
		e.metrics.Workers(int(p.live.Load()))
	}
}

// Workers reports the workers running now and the most there have been.
func (e *Engine) Workers() (now, peak int) {
	e.mu.Lock()
	p := e.pool
	e.mu.Unlock()
	if p == nil {
		return 0, 0
	}
	return int(p.live.Load()), int(p.peak.Load())
}
