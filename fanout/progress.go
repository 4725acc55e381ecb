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
	CodeTimeout, CodeNetwork, CodeUnknown, CodePanic, "TEMPLATE_ERROR",
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
	// Cursor is the TokenID of the last target read from the Source: when a
	// run stops early, the targets after it were never read (not attempted).
	Cursor      atomic.Uint64
	known       [len(knownCodes)]atomic.Int64
	mu          sync.Mutex
	otherCodes  map[string]int64
	watermarkMu sync.Mutex
	watermark   uint64 // every target with TokenID <= watermark is finished
	pages       []*page
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

// page tracks how many targets of one Source page are still unfinished, so
// the watermark (a safe resume cursor) can advance when a page completes.
type page struct {
	lastID    uint64
	remaining atomic.Int64
	done      bool
}

// Watermark is the highest TokenID such that every target at or below it
// has finished: resuming after it never skips an unsent token.
func (p *Progress) Watermark() uint64 {
	p.watermarkMu.Lock()
	defer p.watermarkMu.Unlock()
	return p.watermark
}

func (p *Progress) addPage(pg *page) {
	p.watermarkMu.Lock()
	p.pages = append(p.pages, pg)
	p.watermarkMu.Unlock()
}

// finish marks one target of pg finished; the lock is taken once per page,
// not per target.
func (p *Progress) finish(pg *page) {
	if pg.remaining.Add(-1) != 0 {
		return
	}
	p.watermarkMu.Lock()
	defer p.watermarkMu.Unlock()
	pg.done = true
	i := 0
	for i < len(p.pages) && p.pages[i].done {
		p.watermark = p.pages[i].lastID
		i++
	}
	p.pages = p.pages[i:]
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
