package fanout

import (
	"sync"
	"sync/atomic"
)

// knownCodes get a lock-free counter each; anything else lands in a map
// behind a mutex (rare by definition).
var knownCodes = [...]string{
	CodeUnregistered, CodeInvalidArg, CodeMismatch, CodeQuota, CodeUnavailable,
	CodeInternal, CodeThirdParty, CodeUnauthorized, CodeForbidden, CodeNotFound,
	CodeTimeout, CodeNetwork, CodeUnknown, CodePanic, CodeTemplate,
}

// Progress counts a Run's outcomes with atomics so workers never share a
// lock on the hot path. Every target ends in exactly one of Succeeded,
// Failed or Canceled; Attempted counts targets taken from the Source.
type Progress struct {
	Attempted atomic.Int64 // targets read from the Source
	Succeeded atomic.Int64
	Failed    atomic.Int64
	Canceled  atomic.Int64
	Dead      atomic.Int64 // failed targets whose token is dead
	Retries   atomic.Int64 // engine-level re-attempts
	HTTPSends atomic.Int64 // attempts made (HTTP requests where the Sender counts them)
	// Cursor is the Cursor of the last target read from the Source: when a
	// run stops early, the targets after it were never read (not attempted).
	Cursor      atomic.Uint64
	known       [len(knownCodes)]atomic.Int64
	mu          sync.Mutex
	otherCodes  map[string]int64
	watermarkMu sync.Mutex
	watermark   uint64 // every target with Cursor <= watermark is committed
	pages       []*page
	headIdx     int // targets of pages[0] already committed
}

// countError adds one failure with this code.
func (p *Progress) countError(code string) {
	for i := range knownCodes {
		if knownCodes[i] == code {
			p.known[i].Add(1)
			return
		}
	}
	p.mu.Lock()
	if p.otherCodes == nil {
		p.otherCodes = make(map[string]int64)
	}
	p.otherCodes[code]++
	p.mu.Unlock()
}

// Snapshot is a consistent-enough copy for reporting. Counters are read one
// by one, so during a run they may be a few sends apart; after Run returns
// they are exact.
type Snapshot struct {
	Attempted, Succeeded, Failed, Canceled, Dead, Retries, HTTPSends int64
	Errors                                                           map[string]int64
}

// Snapshot copies the counters.
func (p *Progress) Snapshot() Snapshot {
	s := Snapshot{
		Attempted: p.Attempted.Load(),
		Succeeded: p.Succeeded.Load(),
		Failed:    p.Failed.Load(),
		Canceled:  p.Canceled.Load(),
		Dead:      p.Dead.Load(),
		Retries:   p.Retries.Load(),
		HTTPSends: p.HTTPSends.Load(),
		Errors:    make(map[string]int64),
	}
	for i := range knownCodes {
		if n := p.known[i].Load(); n > 0 {
			s.Errors[knownCodes[i]] = n
		}
	}
	p.mu.Lock()
	for k, v := range p.otherCodes {
		s.Errors[k] += v
	}
	p.mu.Unlock()
	return s
}

// Sub returns s - prev, for flushing deltas.
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := Snapshot{
		Attempted: s.Attempted - prev.Attempted,
		Succeeded: s.Succeeded - prev.Succeeded,
		Failed:    s.Failed - prev.Failed,
		Canceled:  s.Canceled - prev.Canceled,
		Dead:      s.Dead - prev.Dead,
		Retries:   s.Retries - prev.Retries,
		HTTPSends: s.HTTPSends - prev.HTTPSends,
		Errors:    make(map[string]int64),
	}
	for k, v := range s.Errors {
		if n := v - prev.Errors[k]; n != 0 {
			d.Errors[k] = n
		}
	}
	return d
}

// IsZero reports whether nothing changed.
func (s Snapshot) IsZero() bool {
	return s.Attempted == 0 && s.Succeeded == 0 && s.Failed == 0 && s.Canceled == 0 &&
		s.Dead == 0 && s.Retries == 0 && s.HTTPSends == 0 && len(s.Errors) == 0
}

// Per-target outcomes recorded in a page.
const (
	outPending uint8 = iota
	outSucceeded
	outFailed
	outDead // failed, token dead
	outCanceled
)

// page remembers each target's outcome until the page is committed, so a
// checkpoint can store exactly the outcomes of the targets at or below its
// cursor: a resumed run re-sends what is above it and must not find it
// counted already.
type page struct {
	ids       []uint64 // target ids in order
	outcome   []uint8  // written once per index by the goroutine finishing it
	codes     []string // failure code per index ("" otherwise)
	remaining atomic.Int64
}

func newPage(ts []Target) *page {
	pg := &page{ids: make([]uint64, len(ts)), outcome: make([]uint8, len(ts)), codes: make([]string, len(ts))}
	for i, t := range ts {
		pg.ids[i] = t.Cursor
	}
	pg.remaining.Store(int64(len(ts)))
	return pg
}

func (p *Progress) addPage(pg *page) {
	p.watermarkMu.Lock()
	p.pages = append(p.pages, pg)
	p.watermarkMu.Unlock()
}

// finish records one target's outcome. It takes no lock: the atomic
// decrement publishes the write to whoever sees remaining reach zero.
func (p *Progress) finish(pg *page, idx int32, outcome uint8, code string) {
	pg.outcome[idx] = outcome
	pg.codes[idx] = code
	pg.remaining.Add(-1)
}

// Committed is what a checkpoint may store: the outcomes of every target
// with Cursor <= Cursor that earlier Commit calls did not return yet.
type Committed struct {
	Cursor                            uint64
	Succeeded, Failed, Canceled, Dead int64
	Errors                            map[string]int64
}

// IsZero reports whether the delta holds no outcome.
func (c Committed) IsZero() bool {
	return c.Succeeded == 0 && c.Failed == 0 && c.Canceled == 0 && len(c.Errors) == 0
}

// Commit returns the outcomes of the finished targets at the head of the
// run, in Source order, that earlier calls did not return, and the cursor
// after them: a checkpoint stores exactly these, so a run resumed from the
// cursor neither skips nor double-counts a target.
//
// With resumable set, a canceled target is not an outcome but unfinished
// work (the run is stopping for a shutdown and another will resume it): the
// walk stops just before the first one. A later Commit(false) may still
// count it canceled (an admin cancel).
func (p *Progress) Commit(resumable bool) Committed {
	p.watermarkMu.Lock()
	defer p.watermarkMu.Unlock()
	c := Committed{Cursor: p.watermark, Errors: map[string]int64{}}
	for len(p.pages) > 0 {
		pg := p.pages[0]
		if pg.remaining.Load() != 0 {
			break
		}
		for ; p.headIdx < len(pg.outcome); p.headIdx++ {
			o := pg.outcome[p.headIdx]
			if resumable && o == outCanceled {
				return c
			}
			switch o {
			case outSucceeded:
				c.Succeeded++
			case outFailed, outDead:
				c.Failed++
				c.Errors[pg.codes[p.headIdx]]++
				if o == outDead {
					c.Dead++
				}
			case outCanceled:
				c.Canceled++
			}
			c.Cursor = pg.ids[p.headIdx]
			p.watermark = c.Cursor
		}
		p.pages = p.pages[1:]
		p.headIdx = 0
	}
	return c
}

// Watermark is the cursor of the last Commit.
func (p *Progress) Watermark() uint64 {
	p.watermarkMu.Lock()
	defer p.watermarkMu.Unlock()
	return p.watermark
}

// KnownCodes lists every error code pushfan reports.
func KnownCodes() []string { return append([]string(nil), knownCodes[:]...) }

// IsKnownCode reports whether code is one pushfan reports.
func IsKnownCode(code string) bool {
	for _, k := range knownCodes {
		if k == code {
			return true
		}
	}
	return false
}
