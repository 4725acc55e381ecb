package live

import "sync"

// finishedRuns keeps the drawn series of the last finishedRunsKept final
// broadcasts ended more than settled ago. Their send rate no longer
// changes (a late holder's sends land within a lease of the end), and reading it
// is a read of every stored bucket of its run (a week-long paced run is
// about 120,000 of them): reopening its page, or many viewers opening it
// after a link is shared, reads it once.
type finishedRuns struct {
	mu     sync.Mutex
	series map[uint64][]ratePoint // nil: a run too short to draw
	order  []uint64               // oldest first, for eviction
}

const finishedRunsKept = 256

func (f *finishedRuns) get(id uint64) ([]ratePoint, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.series[id]
	return s, ok
}

func (f *finishedRuns) put(id uint64, s []ratePoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.series == nil {
		f.series = map[uint64][]ratePoint{}
	}
	if _, ok := f.series[id]; ok {
		return
	}
	if len(f.order) >= finishedRunsKept {
		delete(f.series, f.order[0])
		f.order = f.order[1:]
	}
	f.series[id] = s
	f.order = append(f.order, id)
}
