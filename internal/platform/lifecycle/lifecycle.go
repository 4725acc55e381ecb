// Package lifecycle gives pushfan's long-running parts river-style
// lifecycles: Start(ctx) and Stop(ctx), where Stop blocks until the part
// has really stopped (or ctx's deadline passes), is safe twice, and is safe
// before Start.
package lifecycle

import (
	"context"
	"sync"
)

// Loop runs one function in its own goroutine between Start and Stop.
// The zero value is ready to use.
type Loop struct {
	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// Start runs fn(ctx') in a goroutine, where ctx' ends when ctx does or at
// Stop. Starting twice, or after Stop, does nothing; it reports whether it
// started fn.
func (l *Loop) Start(ctx context.Context, fn func(ctx context.Context)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return false
	}
	l.started = true
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		fn(ctx)
	}()
	return true
}

// Stop cancels fn's context and waits for fn to return, up to ctx's
// deadline (then it returns ctx's error; fn still ends on its own). Safe
// twice, and before Start (which then never starts).
func (l *Loop) Stop(ctx context.Context) error {
	l.mu.Lock()
	l.started = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Group is a set of goroutines that one owner waits for. Once Close has
// been called, Go starts nothing more, so a Wait that follows never races a
// late Go (a plain sync.WaitGroup must not be Added to while it is
// waited on). The zero value is ready to use.
type Group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs fn in a goroutine of the group, unless the group is closed; it
// reports whether fn runs.
func (g *Group) Go(fn func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(fn)
	return true
}

// Add registers one unit of work done in the caller's own goroutine (end
// it with Done), unless the group is closed; it reports whether it did.
func (g *Group) Add() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// Done ends a unit of work registered by Add.
func (g *Group) Done() { g.wg.Done() }

// Close stops the group from taking more goroutines.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// Wait closes the group and waits for its goroutines, up to ctx's deadline.
func (g *Group) Wait(ctx context.Context) error {
	g.Close()
	return WaitFor(ctx, g.wg.Wait)
}

// WaitFor runs wait (a blocking wait, such as a WaitGroup's) and returns
// when it does, or at ctx's deadline with ctx's error (wait goes on by
// itself then).
func WaitFor(ctx context.Context, wait func()) error {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Latch is one part's "stopped taking work", which the parts answering
// beside it watch: closed once, it stays closed. A nil *Latch is never
// closed. The zero value is open and ready to use.
type Latch struct {
	mu     sync.Mutex
	closed bool
	done   chan struct{} // made on first use; closed with the latch
}

// Close closes the latch; safe twice, and on a nil one (a no-op).
func (l *Latch) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if l.done != nil {
		close(l.done)
	}
}

// Closed reports whether the latch is closed.
func (l *Latch) Closed() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Done is a channel closed with the latch (nil, which blocks forever, for
// a nil latch), for a select.
func (l *Latch) Done() <-chan struct{} {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
		if l.closed {
			close(l.done)
		}
	}
	return l.done
}
