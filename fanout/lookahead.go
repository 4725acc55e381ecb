package fanout

import "sync"

// lookahead is produce for a run with a Cap: a reader goroutine reads and
// reserves the next page while this goroutine hands the current one to
// the workers. The reservation is a few statements for the whole page,
// and done in line the producer waited on them with the work queue
// draining: measured at the defaults with 1/day, a page took ~200 ms to
// reserve on a loaded database, against ~100 ms of queued sends.
//
// Every step still takes effect here, one at a time and in the order it
// was read (a page's enqueue, a skip range's done), as without a Cap. The
// channel is unbuffered, so the reader is at most one page ahead and two
// page buffers suffice: it reads into one while this goroutine enqueues
// the other. A page the reader reserved that is never enqueued (the run
// stopped meanwhile) is abandoned, so that the checkpoint gives its users'
// slots back, exactly as a reservation cut short by the stop. The reader
// is joined before lookahead returns.
func (r *run) lookahead() {
	steps := make(chan step)
	var reader sync.WaitGroup
	reader.Go(func() {
		defer close(steps)
		var bufs [2][]Target
		i := 0
		// The reader may only return once the run stopped or the Source
		// is exhausted: until then this goroutine takes every step.
		r.read(func(s step) bool {
			steps <- s
			return true
		}, func() []Target { return bufs[i] }, func(b []Target) { bufs[i], i = b, 1-i })
	})
	for s := range steps {
		if !r.record(s) {
			break
		}
	}
	// The run stopped (record is false only then): what the reader still
	// hands over was read after the stop began, and is not recorded,
	// except the pages it reserved (or began to).
	for s := range steps {
		if s.page != nil && (s.err == nil || s.abandon) {
			r.abandon(s.page)
		}
	}
	reader.Wait()
}
