package fcm

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// perTransport is how many requests one of the pool's transports carries
// at once: over HTTP/2 its one connection's streams (FCM's front ends, like
// the bundled emulator, allow 100 concurrent streams a connection); over
// HTTP/1.1 its connections.
const perTransport = 100

// roundTripCloser is the transport a Client sends through and closes.
type roundTripCloser interface {
	http.RoundTripper
	CloseIdleConnections()
}

// connPool spreads requests over transports that each carry up to
// perTransport at once, and adds one only when every one is full, so that
// connections follow the sends in flight instead of their bursts.
//
// Over HTTP/2, Go's transport on its own dials a new connection for every
// request that finds the streams of the open ones taken, and drops most of
// them again: against the emulator at 300 ms, with 4,000 sends in flight,
// one broadcast cost 35,748 TLS handshakes. Here each transport holds one
// connection (MaxConnsPerHost 1, and requests wait for a stream rather
// than dial), so a broadcast opens in-flight/100 connections. Over
// HTTP/1.1, a transport holds up to 100 connections and a request waits for
// one of them to free rather than dial past that: a burst of sends at
// start (the rate limiter's bucket, all at once) dialled thousands of
// connections that then sat idle at 10 ms.
//
// Should an HTTP/2 pool get an HTTP/1.1 answer (a proxy that does not speak
// HTTP/2), one connection a transport would serialise the sends: from then
// on the pool makes HTTP/1.1 transports instead.
type connPool struct {
	base  *http.Transport
	max   int // transports at most
	http1 atomic.Bool

	mu    sync.Mutex
	conns []*pooledConn
}

type pooledConn struct {
	t        *http.Transport
	inFlight atomic.Int64
}

// newConnPool pools transports made like base, enough for concurrency
// requests at once; h2 says the server speaks HTTP/2.
func newConnPool(base *http.Transport, concurrency int, h2 bool) *connPool {
	p := &connPool{base: base, max: concurrency/perTransport + 1}
	p.http1.Store(!h2)
	return p
}

func (p *connPool) newTransport() *http.Transport {
	t := p.base.Clone()
	if p.http1.Load() {
		t.MaxConnsPerHost, t.MaxIdleConnsPerHost = perTransport, perTransport
	} else {
		t.MaxConnsPerHost = 1
		t.HTTP2 = &http.HTTP2Config{StrictMaxConcurrentRequests: true}
	}
	return t
}

func (p *connPool) RoundTrip(req *http.Request) (*http.Response, error) {
	c := p.pick()
	resp, err := c.t.RoundTrip(req)
	if err != nil {
		c.inFlight.Add(-1)
		return nil, err
	}
	if resp.ProtoMajor < 2 && !p.http1.Load() {
		p.fallBack()
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, done: func() { c.inFlight.Add(-1) }}
	return resp, nil
}

// pick takes a stream on the least loaded connection, opening one more
// when all are full (up to max).
func (p *connPool) pick() *pooledConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *pooledConn
	for _, c := range p.conns {
		if best == nil || c.inFlight.Load() < best.inFlight.Load() {
			best = c
		}
	}
	if best == nil || (best.inFlight.Load() >= perTransport && len(p.conns) < p.max) {
		best = &pooledConn{t: p.newTransport()}
		p.conns = append(p.conns, best)
	}
	best.inFlight.Add(1)
	return best
}

// fallBack replaces the HTTP/2 transports by HTTP/1.1 ones (see connPool);
// requests in flight on the old ones finish there.
func (p *connPool) fallBack() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.http1.Swap(true) {
		return
	}
	for _, c := range p.conns {
		c.t.CloseIdleConnections()
	}
	p.conns = nil
}

func (p *connPool) CloseIdleConnections() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.t.CloseIdleConnections()
	}
}

// doneBody calls done once, when the body is closed.
type doneBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *doneBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}
