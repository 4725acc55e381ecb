package transport

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// perTransport is how many requests one of the pool's transports carries
// at once: over HTTP/2 its one connection's streams (FCM's front ends, like
// the bundled emulator, allow 100 concurrent streams a connection); over
// HTTP/1.1 its connections.
const perTransport = 100

// ConnPool spreads requests over transports that each carry up to
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
type ConnPool struct {
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

// NewConnPool pools transports made like base (NewHTTPTransport's),
// enough for concurrency requests at once; h2 says the server speaks
// HTTP/2.
func NewConnPool(base *http.Transport, concurrency int, h2 bool) *ConnPool {
	p := &ConnPool{base: base, max: concurrency/perTransport + 1}
	p.http1.Store(!h2)
	return p
}

func (p *ConnPool) newTransport() *http.Transport {
	t := p.base.Clone()
	if p.http1.Load() {
		t.MaxConnsPerHost, t.MaxIdleConnsPerHost = perTransport, perTransport
	} else {
		t.MaxConnsPerHost = 1
		t.HTTP2 = &http.HTTP2Config{StrictMaxConcurrentRequests: true}
	}
	return t
}

// RoundTrip sends req on the least loaded of the pool's transports
// (http.RoundTripper).
func (p *ConnPool) RoundTrip(req *http.Request) (*http.Response, error) {
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
func (p *ConnPool) pick() *pooledConn {
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

// fallBack replaces the HTTP/2 transports by HTTP/1.1 ones (see ConnPool);
// requests in flight on the old ones finish there.
func (p *ConnPool) fallBack() {
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

// CloseIdleConnections closes the idle connections of every transport.
func (p *ConnPool) CloseIdleConnections() {
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

// NewHTTPTransport is net/http's transport for concurrency requests at
// once, trusting the PEM roots in caFile as well as the system's (an
// emulator's self-signed CA; "" for none), speaking HTTP/2 without TLS to
// an http:// URL when h2c. It is the base of a ConnPool, and its TLS
// configuration that of the HTTP/2 client (Options.TLS).
func NewHTTPTransport(caFile string, h2c bool, concurrency int) (*http.Transport, error) {
	conc := concurrency
	if conc < 1 {
		conc = 1
	}
	t := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        conc + 16,
		MaxIdleConnsPerHost: conc + 16, // every worker keeps its connection between sends
		// Over HTTP/1.1 a send is a connection: no more than the workers,
		// however a burst of sends races the dials (see ConnPool for HTTP/2).
		MaxConnsPerHost:       conc + 16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("fcm: reading CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fcm: %s holds no PEM certificate", caFile)
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		t.Protocols = &p
	}
	return t, nil
}
