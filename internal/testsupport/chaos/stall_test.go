package chaos

import (
	"context"
	"sync"
	"time"
)

// stallProbe measures how late this process runs its goroutines. The
// emulators live here, and a request's arrival instant is taken when its
// handler runs: while the process is descheduled (two vCPUs shared with
// three replicas, MariaDB and the fault proxy), requests pile up in the
// socket buffers and are then stamped together at the stall's end. A
// stall of L at the start of a quota window thus moves up to L's worth of
// earlier sends into it, by the checker's clock only: the sends were
// spread as the replicas' throttles spaced them. The quota check allows
// for exactly that (see quotaAllowance), and the report names the longest
// stall.
type stallProbe struct {
	mu     sync.Mutex
	stalls []stall
}

// stall is one late wake-up: the probe ran `late` after it should have,
// at end.
type stall struct {
	end  time.Time
	late time.Duration
}

// probeEvery is the probe's tick; a wake-up later than probeSlack past
// it is recorded as a stall.
const (
	probeEvery = 10 * time.Millisecond
	probeSlack = 10 * time.Millisecond
)

// run ticks until ctx ends.
func (p *stallProbe) run(ctx context.Context) {
	for {
		want := time.Now().Add(probeEvery)
		if sleep(ctx, probeEvery) != nil {
			return
		}
		if late := time.Since(want); late > probeSlack {
			p.mu.Lock()
			p.stalls = append(p.stalls, stall{end: time.Now(), late: late})
			p.mu.Unlock()
		}
	}
}

// lead is how far before from the sends stamped in [from, from+w] may
// really have arrived: a stall ending at e, inside the window, that lasted
// longer than e − from stamped sends of before from at e.
func (p *stallProbe) lead(from time.Time, w time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var lead time.Duration
	for _, s := range p.stalls {
		if s.end.Before(from) || s.end.After(from.Add(w)) {
			continue
		}
		lead = max(lead, s.late-s.end.Sub(from))
	}
	return lead
}

// longest is the longest stall, and when it ended (zero: none).
func (p *stallProbe) longest() stall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var m stall
	for _, s := range p.stalls {
		if s.late > m.late {
			m = s
		}
	}
	return m
}
