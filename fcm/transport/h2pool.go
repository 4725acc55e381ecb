package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// h2Pool is the HTTP/2 client: connections that each carry up to the
// server's MAX_CONCURRENT_STREAMS (100 at FCM and the emulator), filled
// one after the other; a connection is dialled only when every open one is
// full, one per 100 sends waiting, and at most as many as the sends in
// flight fill (concurrency / the streams a connection takes, + 1).
type h2Pool struct {
	dialer      *h2Dialer
	headers     *h2Headers
	concurrency int
	log         *slog.Logger
	// writeTimeout bounds each batch of frames a connection's writer
	// writes (writeTimeout; shorter in tests).
	writeTimeout time.Duration

	// ctx ends at close: it bounds the dials.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // dials and every connection's reader and writer
	// noH2 is set once a dial found the server does not speak HTTP/2 over
	// TLS: sends go through net/http from then on.
	noH2  atomic.Bool
	dials atomic.Int64
	// streamLimit is the last MAX_CONCURRENT_STREAMS a server sent: a new
	// connection's capacity until its own SETTINGS arrive.
	streamLimit atomic.Uint32

	mu      sync.Mutex
	conns   []*h2Conn        // taking new streams
	all     map[*h2Conn]bool // open, taking new streams or not
	active  map[*h2Conn]int
	dialing int
	waiters []*h2Waiter
	closed  bool
}

// h2Waiter is a send waiting for a stream slot.
type h2Waiter struct {
	ch chan h2Pick // cap 1
}

type h2Pick struct {
	c   *h2Conn
	err error
}

func newH2Pool(d *h2Dialer, h *h2Headers, concurrency int, log *slog.Logger) *h2Pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &h2Pool{dialer: d, headers: h, concurrency: max(concurrency, 1), log: log, writeTimeout: writeTimeout,
		ctx: ctx, cancel: cancel, active: make(map[*h2Conn]int), all: make(map[*h2Conn]bool)}
	p.streamLimit.Store(perTransport) // FCM's, and the emulator's
	return p
}

// start hands s, its body set, to a connection as one request and
// returns without waiting for the answer (h2Send.Wait does). The send's
// goroutine goes through the deep part (headers, a stream slot, the
// queue) here and returns from it, so that it parks in Wait with a
// shallow stack: 4,096 sends parked with 8 KB stacks were a third of the
// process's memory.
func (p *h2Pool) start(ctx context.Context, s *h2Stream) error {
	hdr, err := p.headers.block(ctx)
	if err != nil {
		return err
	}
	s.hdr, s.done = hdr, make(chan Result, 1)
	// A connection can fail or go away between acquire and enqueue; the
	// request has not left then, so another connection may take it
	// without any risk of a duplicate. Bounded: a server that fails every
	// connection at once gives the send its error.
	for attempt := 1; ; attempt++ {
		c, err := p.acquire(ctx)
		if err != nil {
			return err
		}
		s.conn = c
		err = c.enqueue(s)
		if err == nil {
			return nil
		}
		p.release(c)
		if attempt == 3 {
			return err
		}
	}
}

// h2Send is a started stream and what finishes its answer (Pending).
type h2Send[T any] struct {
	h2Stream
	finish func(context.Context, Result) T
}

// Wait returns the finished answer of the stream, or gives the stream up
// when ctx ends first. It parks in the select, its own frame.
func (s *h2Send[T]) Wait(ctx context.Context) T {
	select {
	case r := <-s.done:
		return s.finish(ctx, r)
	case <-ctx.Done():
		return s.finish(ctx, s.giveUp(ctx))
	}
}

// giveUp cancels s for Wait (kept out of Wait's frame: see start).
//
//go:noinline
func (s *h2Stream) giveUp(ctx context.Context) Result {
	if r, ok := s.conn.cancel(s); ok {
		return r
	}
	return Result{Err: fmt.Errorf("fcm: waiting for the answer: %w", ctx.Err())}
}

// acquire takes a stream slot on the first connection with one free,
// or waits for one (see h2Pool).
func (p *h2Pool) acquire(ctx context.Context) (*h2Conn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errConnClosed
	}
	for _, c := range p.conns {
		if p.active[c] < int(c.limit.Load()) {
			p.active[c]++
			p.mu.Unlock()
			return c, nil
		}
	}
	w := &h2Waiter{ch: make(chan h2Pick, 1)}
	p.waiters = append(p.waiters, w)
	p.dialLocked()
	p.mu.Unlock()
	select {
	case pk := <-w.ch:
		return pk.c, pk.err
	case <-ctx.Done():
		p.mu.Lock()
		for i, o := range p.waiters {
			if o == w {
				p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
				p.mu.Unlock()
				return nil, fmt.Errorf("fcm: waiting for an HTTP/2 stream: %w", ctx.Err())
			}
		}
		p.mu.Unlock()
		if pk := <-w.ch; pk.c != nil { // handed a slot as ctx ended
			p.release(pk.c)
		}
		return nil, fmt.Errorf("fcm: waiting for an HTTP/2 stream: %w", ctx.Err())
	}
}

// dialLocked starts a dial when the waiters outnumber what the dials under
// way will bring and there is room for a connection more.
func (p *h2Pool) dialLocked() {
	if p.closed || p.noH2.Load() {
		return
	}
	per := max(int(p.streamLimit.Load()), 1) // a server may say 0 for a while
	maxConns := p.concurrency/per + 1
	for len(p.waiters) > p.dialing*per && len(p.conns)+p.dialing < maxConns {
		p.dialing++
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.dial()
		}()
	}
}

func (p *h2Pool) dial() {
	p.dials.Add(1)
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	nc, err := p.dialer.dial(ctx)
	var c *h2Conn
	if err == nil {
		c, err = startH2Conn(p, nc, &p.wg)
	}
	p.mu.Lock()
	p.dialing--
	if err != nil {
		if errors.Is(err, errNoH2) {
			p.noH2.Store(true)
		} else {
			p.log.Warn("fcm: dialing an HTTP/2 connection", "err", err)
		}
		// The sends this dial was for fail (the engine retries them); a
		// send for which no connection is coming would wait forever.
		n := len(p.waiters)
		if !errors.Is(err, errNoH2) {
			n = min(n, max(len(p.waiters)-p.dialing*max(int(p.streamLimit.Load()), 1), 0))
		}
		for _, w := range p.waiters[:n] {
			w.ch <- h2Pick{err: err}
		}
		p.waiters = append(p.waiters[:0], p.waiters[n:]...)
		p.mu.Unlock()
		return
	}
	if p.closed {
		p.mu.Unlock()
		c.close(errConnClosed)
		return
	}
	p.conns = append(p.conns, c)
	p.all[c] = true
	p.active[c] = 0
	p.handLocked(c)
	p.dialLocked() // more waiting than it took
	p.mu.Unlock()
}

// handLocked gives c's free slots to the sends waiting, first come first.
func (p *h2Pool) handLocked(c *h2Conn) {
	for len(p.waiters) > 0 && p.active[c] < int(c.limit.Load()) {
		if !p.usableLocked(c) {
			return
		}
		w := p.waiters[0]
		p.waiters[0] = nil
		p.waiters = p.waiters[1:]
		p.active[c]++
		w.ch <- h2Pick{c: c}
	}
}

func (p *h2Pool) usableLocked(c *h2Conn) bool {
	for _, o := range p.conns {
		if o == c {
			return true
		}
	}
	return false
}

// release frees a stream slot of c, or hands it to a waiting send.
func (p *h2Pool) release(c *h2Conn) { p.releaseN(c, 1) }

func (p *h2Pool) releaseN(c *h2Conn, n int) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	if _, ok := p.active[c]; ok {
		p.active[c] -= n
	}
	if len(p.waiters) > 0 {
		p.handLocked(c)
	}
	p.mu.Unlock()
}

// capacityChanged is called when the server changed c's stream limit.
func (p *h2Pool) capacityChanged(c *h2Conn) {
	p.mu.Lock()
	p.handLocked(c)
	p.mu.Unlock()
}

// retire takes c out of the connections that take new streams (GOAWAY,
// failed, closed).
func (p *h2Pool) retire(c *h2Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, o := range p.conns {
		if o == c {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			delete(p.active, c)
			p.dialLocked() // the sends waiting may need another
			return
		}
	}
}

// forget drops a closed connection.
func (p *h2Pool) forget(c *h2Conn) {
	p.mu.Lock()
	delete(p.all, c)
	p.mu.Unlock()
}

// retireIdle retires c if it carries no stream, and reports whether it
// did.
func (p *h2Pool) retireIdle(c *h2Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.active[c] != 0 {
		return false
	}
	for i, o := range p.conns {
		if o == c {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			delete(p.active, c)
			return true
		}
	}
	return false
}

// close closes every connection and waits for their goroutines; sends
// still waiting fail.
func (p *h2Pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.closed = true
	conns := make([]*h2Conn, 0, len(p.all))
	for c := range p.all {
		conns = append(conns, c)
	}
	for _, w := range p.waiters {
		w.ch <- h2Pick{err: errConnClosed}
	}
	p.waiters = nil
	p.mu.Unlock()
	p.cancel()
	for _, c := range conns {
		c.close(errConnClosed)
	}
	p.wg.Wait()
}

// openConns is how many connections take new streams (for tests).
func (p *h2Pool) openConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}
