package fanout

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// errSendTimeout is the cause of a send stopped by the per-send timeout. It
// wraps context.DeadlineExceeded, so a Sender that looks at the cause sees
// a deadline.
var errSendTimeout = fmt.Errorf("send timeout: %w", context.DeadlineExceeded)

// sendScope is one worker's context for its sends, reused from one send to
// the next so that sending allocates nothing for bookkeeping: a
// context.WithTimeout per send costs four allocations and a runtime timer.
//
// The context is a cancel context; a reusable timer cancels it when a send
// overruns the timeout. A canceled context is replaced at the next begin,
// which only happens after a timeout (rare).
//
// The send context carries no values of the broadcast's context (request
// id): nothing under the Sender reads them, and a per-run context would
// have to be rebuilt whenever the worker switches broadcast.
type sendScope struct {
	timeout time.Duration
	timer   *time.Timer

	// mu is this worker's own: only the worker and its timer take it, so
	// it is never contended the way a lock shared by workers would be. It
	// makes "is this the send the timer was armed for" exact.
	mu       sync.Mutex
	ctx      context.Context
	cancel   context.CancelCauseFunc
	armed    bool
	deadline time.Time
}

func newSendScope(timeout time.Duration) *sendScope {
	s := &sendScope{timeout: timeout}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.timer = time.AfterFunc(time.Hour, s.expire)
	s.timer.Stop()
	return s
}

// begin arms the scope for one send and returns the context to send with.
func (s *sendScope) begin() context.Context {
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.ctx, s.cancel = context.WithCancelCause(context.Background())
	}
	s.armed = true
	s.deadline = time.Now().Add(s.timeout)
	ctx := s.ctx
	s.mu.Unlock()
	s.timer.Reset(s.timeout)
	return ctx
}

// end disarms the scope and returns why its context was canceled during
// the send (errSendTimeout), or nil.
func (s *sendScope) end() error {
	s.timer.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	if s.ctx.Err() != nil {
		return context.Cause(s.ctx)
	}
	return nil
}

// expire runs on the timer's goroutine. A timer that fires late, after its
// send ended or while the next one runs, finds the scope disarmed or the
// new deadline still ahead, and does nothing.
func (s *sendScope) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.armed && !time.Now().Before(s.deadline) {
		s.cancel(errSendTimeout)
	}
}

// close releases the timer when the worker exits.
func (s *sendScope) close() {
	s.timer.Stop()
	s.mu.Lock()
	s.armed = false
	s.cancel(context.Canceled)
	s.mu.Unlock()
}
