package fanout

import (
	"sync"
	"sync/atomic"
)

// Range is the inclusive span [Lo, Hi] of target cursors. In a Job's Skip
// and a Committed's Done it means: every target read with a cursor in the
// span has its outcome stored already.
type Range struct{ Lo, Hi uint64 }

// Per-target states recorded in a page. The committed bit is set by Commit
// once a checkpoint has taken the outcome.
const (
	outPending uint32 = iota
	outSucceeded
	outFailed
	outCanceled
	outCapped        // withheld by a frequency cap (Job.Cap): never sent
	outMask   uint32 = 0x0f
	committed uint32 = 0x10
)

// Progress follows a Run's targets from the moment they are read until a
// checkpoint takes their outcomes with Commit. Workers record each outcome
// without a lock (one atomic store per target); only Commit, a few times a
// second, takes the mutex.
//
// It is what makes a checkpoint exact: Commit returns every outcome not
// returned before, the cursor below which every target has one, and the
// ranges above the cursor whose targets have one too. A run resumed from
// that cursor, skipping those ranges, neither repeats nor double-counts a
// target whose outcome was stored.
type Progress struct {
	// Frontier is the cursor of the last target read from the Source (or
	// the end of the last skipped range): when a run stops early, the
	// targets after it were never read.
	Frontier atomic.Uint64

	mu        sync.Mutex
	watermark uint64    // every target at or below it is committed
	segs      []segment // what was read above the watermark, in read order
	// ahead are the run's Skip ranges the producer has not reached yet:
	// their outcomes are stored already, so every Commit reports them
	// until the producer steps over them (addDone).
	ahead []Range
}

// segment is a page still holding targets to commit, or (pg == nil) a
// range whose targets are all committed.
type segment struct {
	pg   *page
	done Range
}

// page remembers each target's outcome until Commit has taken it. A page
// whose every target is committed becomes a range segment, so memory is
// held only by pages with a target still in flight or waiting to retry.
type page struct {
	ids   []uint64        // target cursors in order
	state []atomic.Uint32 // out* | committed
	fails []*Failure      // set before state for failed targets
	head  int             // targets [0, head) are committed (guarded by Progress.mu)

	// users[i] is target i's user, for a run with a frequency cap; nil
	// without.
	users []uint64
	// variant[i] is target i's index in names (Job.Variants); nil without.
	variant []uint16
	names   []string
	// platform[i] is target i's Platform; nil when no target has one.
	platform []string
}

func newPage(ts []Target) *page {
	pg := &page{ids: make([]uint64, len(ts)), state: make([]atomic.Uint32, len(ts)), fails: make([]*Failure, len(ts))}
	for i, t := range ts {
		pg.ids[i] = t.Cursor
		if t.Platform != "" {
			if pg.platform == nil {
				pg.platform = make([]string, len(ts))
			}
			pg.platform[i] = t.Platform
		}
	}
	return pg
}

// Reset prepares p for a run resuming after `after` with the done ranges
// skip (sorted, above after): what a chunk's claim stored. Run does it
// too; a caller that may commit before Run starts (a run that stops
// before it begins) resets first, so its checkpoint keeps the ranges.
func (p *Progress) Reset(after uint64, skip []Range) {
	p.mu.Lock()
	p.watermark, p.segs = after, nil
	p.ahead = p.ahead[:0]
	for _, r := range skip {
		if r.Hi > after {
			p.ahead = append(p.ahead, r)
		}
	}
	p.mu.Unlock()
	p.Frontier.Store(after)
}

func (p *Progress) addPage(pg *page) {
	p.mu.Lock()
	p.segs = append(p.segs, segment{pg: pg})
	p.mu.Unlock()
	p.Frontier.Store(pg.ids[len(pg.ids)-1])
}

// addDone records a range whose outcomes a previous run stored (a Job's
// Skip): it is committed already and counts nothing.
func (p *Progress) addDone(r Range) {
	p.mu.Lock()
	p.segs = append(p.segs, segment{done: r})
	for len(p.ahead) > 0 && p.ahead[0].Lo <= r.Hi {
		p.ahead = p.ahead[1:]
	}
	p.mu.Unlock()
	p.Frontier.Store(r.Hi)
}

// finish records one target's outcome. The store publishes fail (written
// before it) to Commit, which loads the state first.
func (pg *page) finish(idx int32, outcome uint32, fail *Failure) {
	if fail != nil {
		pg.fails[idx] = fail
	}
	pg.state[idx].Store(outcome)
}

// Committed is what a checkpoint stores: the outcomes no earlier Commit
// returned, and where the run stands.
type Committed struct {
	// Cursor: every target at or below it has an outcome (stored before,
	// or in this delta).
	Cursor uint64
	// Done are the ranges above Cursor whose targets all have an outcome,
	// sorted: the full set, not a delta, the run's unreached Skip ranges
	// included.
	Done                        []Range
	Succeeded, Failed, Canceled int64
	// Capped are the delta's targets withheld by a frequency cap.
	Capped   int64
	Errors   map[string]int64
	Failures []Failure // the failed targets of this delta
	// SentUsers are the users with a target succeeded in this delta, and
	// UnsentUsers those with one failed or canceled (either may list a
	// user twice, or in both): a capped run's checkpoint settles their
	// reservations. Nil without Job.Cap.
	SentUsers, UnsentUsers []uint64
	// Variants counts the delta's sent targets per Job.Variants name,
	// succeeded and failed apart; nil when the run has no variants.
	Variants map[string]Sent
	// Platforms counts the delta's sent targets per Target.Platform ("":
	// none), succeeded and failed apart; nil when it sent none.
	Platforms map[string]Sent
	// SucceededIDs and CappedIDs are the cursors of the delta's succeeded
	// and capped targets, in read order (its failed ones are in Failures).
	// A checkpoint fenced off by a takeover stores them aside: if a cancel
	// then ends the chunk before its new holder sent them again, they are
	// what was really sent (lease, fenced holders), not canceled. Eight
	// bytes a target, and gone with the checkpoint. With CanceledIDs (the
	// delta's canceled targets: read, never sent) they are also every
	// target's outcome the checkpoint keeps (lease, outcomes.go).
	SucceededIDs, CappedIDs, CanceledIDs []uint64
}

// IsZero reports whether the delta holds no outcome.
func (c Committed) IsZero() bool {
	return c.Succeeded == 0 && c.Failed == 0 && c.Canceled == 0 && c.Capped == 0
}

// Commit returns the outcomes recorded since the previous Commit, and the
// cursor and done ranges after them.
//
// With resumable set, a canceled target is not an outcome but unfinished
// work (the run is stopping for a shutdown and another will resume it):
// it stays uncommitted, outside the cursor and the ranges. A later
// Commit(false) may still count it canceled (an admin cancel).
func (p *Progress) Commit(resumable bool) Committed {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := Committed{Errors: map[string]int64{}}
	for i := range p.segs {
		pg := p.segs[i].pg
		if pg == nil {
			continue
		}
		all := true
		for j := pg.head; j < len(pg.ids); j++ {
			s := pg.state[j].Load()
			if s&committed != 0 {
				continue
			}
			o := s & outMask
			if o == outPending || (resumable && o == outCanceled) {
				all = false
				continue
			}
			if o == outSucceeded || o == outFailed {
				c.countSent(pg, j, o == outSucceeded)
			}
			if pg.users != nil {
				switch o {
				case outSucceeded:
					c.SentUsers = append(c.SentUsers, pg.users[j])
				case outFailed, outCanceled:
					c.UnsentUsers = append(c.UnsentUsers, pg.users[j])
				}
			}
			switch o {
			case outSucceeded:
				c.Succeeded++
				c.SucceededIDs = append(c.SucceededIDs, pg.ids[j])
			case outFailed:
				c.Failed++
				f := pg.fails[j]
				c.Errors[f.Code]++
				c.Failures = append(c.Failures, *f)
				pg.fails[j] = nil
			case outCanceled:
				c.Canceled++
				c.CanceledIDs = append(c.CanceledIDs, pg.ids[j])
			case outCapped:
				c.Capped++
				c.CappedIDs = append(c.CappedIDs, pg.ids[j])
			}
			pg.state[j].Store(s | committed)
		}
		for pg.head < len(pg.ids) && pg.state[pg.head].Load()&committed != 0 {
			pg.head++
		}
		if all {
			p.segs[i] = segment{done: Range{pg.ids[0], pg.ids[len(pg.ids)-1]}}
		}
	}
	p.compact()
	c.Cursor = p.watermark
	c.Done = p.doneRanges()
	return c
}

// Sent is how many sent targets FCM accepted and how many failed.
type Sent struct{ Succeeded, Failed int64 }

func (s Sent) add(ok bool) Sent {
	if ok {
		s.Succeeded++
	} else {
		s.Failed++
	}
	return s
}

// countSent counts sent target j of pg (ok: succeeded) under its platform
// and its variant.
func (c *Committed) countSent(pg *page, j int, ok bool) {
	plat := ""
	if pg.platform != nil {
		plat = pg.platform[j]
	}
	if c.Platforms == nil {
		c.Platforms = make(map[string]Sent, 4)
	}
	c.Platforms[plat] = c.Platforms[plat].add(ok)
	if pg.variant == nil || pg.variant[j] == noVariant {
		return
	}
	if c.Variants == nil {
		c.Variants = make(map[string]Sent, len(pg.names))
	}
	name := pg.names[pg.variant[j]]
	c.Variants[name] = c.Variants[name].add(ok)
}

// compact merges adjacent range segments and moves the watermark over the
// leading committed ones (called with p.mu held).
func (p *Progress) compact() {
	out := p.segs[:0]
	for _, s := range p.segs {
		if n := len(out); n > 0 && s.pg == nil && out[n-1].pg == nil {
			out[n-1].done.Hi = s.done.Hi
			continue
		}
		out = append(out, s)
	}
	clear(p.segs[len(out):]) // drop references to compacted pages
	p.segs = out
	for len(p.segs) > 0 {
		s := p.segs[0]
		if s.pg == nil {
			p.watermark = s.done.Hi
			p.segs[0] = segment{}
			p.segs = p.segs[1:]
			continue
		}
		if s.pg.head > 0 {
			p.watermark = s.pg.ids[s.pg.head-1]
		}
		break
	}
}

// doneRanges lists the runs of committed targets above the watermark in
// read order (called with p.mu held). Targets adjacent in read order are
// adjacent in the audience, so a run spans from its first cursor to its
// last.
func (p *Progress) doneRanges() []Range {
	var out []Range
	open := false
	add := func(lo, hi uint64) {
		if open {
			out[len(out)-1].Hi = hi
		} else {
			out = append(out, Range{lo, hi})
			open = true
		}
	}
	for _, s := range p.segs {
		if s.pg == nil {
			add(s.done.Lo, s.done.Hi)
			continue
		}
		// Only the first segment can hold targets at or below the
		// watermark (its committed prefix); skip those by cursor.
		for j := range s.pg.ids {
			if s.pg.ids[j] <= p.watermark {
				continue
			}
			if s.pg.state[j].Load()&committed != 0 {
				add(s.pg.ids[j], s.pg.ids[j])
			} else {
				open = false
			}
		}
	}
	// Unread targets may lie between what was read and a range ahead: never
	// merged with the last run.
	return append(out, p.ahead...)
}
