package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// h1Pool is the HTTP/1.1 client, for a plain http:// endpoint (the
// emulator): one request at a time a connection, written and read by the
// send's own goroutine.
//
// net/http's transport keeps two goroutines and a 4 KB read and a 4 KB
// write buffer for every connection, and over HTTP/1.1 a send in flight is
// a connection: at 4,096 in flight that was 8,192 goroutines and 185–255 MB
// of RSS. Here a connection is its socket and a 1 KB read buffer
// (h1ReadBufferSize), and the request is written from a pooled buffer.
//
// Connections follow the sends in flight, with no churn: a send takes an
// idle connection (the most recently used) or waits for one, and a
// connection is dialled only while the sends waiting outnumber the dials
// under way, at most h1MaxDials at once. So the connections open are at
// most the most sends in flight at once (net/http starts a dial for every
// request that finds no idle connection, and keeps the connection when
// another frees first: 2,601 connections for 986 sends in flight).
type h1Pool struct {
	addr string // host:port to dial
	head []byte // the request up to Content-Length's value
	max  int    // connections at most (idle ones above are closed)
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// ctx ends at close: it bounds the dials.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // dials
	dials  atomic.Int64
	// bufs holds the buffers requests are written from (*[]byte): a send
	// holds one only while it writes.
	bufs sync.Pool

	mu      sync.Mutex
	idle    []*h1Conn // oldest first
	open    int       // connections open, idle or not, and dials under way
	dialing int
	waiters []chan h1Pick
	closed  bool
}

const (
	// h1ReadBufferSize holds an FCM answer's head and body (success
	// answers are about 200 bytes, errors under 1 KB); a longer one is read
	// through it.
	h1ReadBufferSize = 1 << 10
	// h1MaxDials bounds the dials under way: a dial is a goroutine with a
	// deep stack, and 4,096 at once at start were 30–60 MB of stacks.
	h1MaxDials = 16
)

type h1Conn struct {
	nc       net.Conn
	br       *bufio.Reader
	lastUsed time.Time
}

type h1Pick struct {
	c   *h1Conn
	err error
}

// newH1Pool is the HTTP/1.1 client for rawURL (http://), sending header
// with every request, with at most concurrency + 16 connections.
func newH1Pool(rawURL string, header http.Header, concurrency int) (*h1Pool, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fcm: endpoint: %w", err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("fcm: the HTTP/1.1 client speaks plain http, not %q", u.Scheme)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	// The head net/http writes for the same request, less Accept-Encoding:
	// gzip (net/http adds it only to undo it itself; the answers are tiny).
	head := []byte("POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: Go-http-client/1.1\r\n")
	keys := make([]string, 0, len(header))
	for k := range header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range header[k] {
			head = append(head, k+": "+v+"\r\n"...)
		}
	}
	head = append(head, "Content-Length: "...)
	ctx, cancel := context.WithCancel(context.Background())
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &h1Pool{addr: addr, head: head, max: max(concurrency, 1) + 16, dial: d.DialContext, ctx: ctx, cancel: cancel}, nil
}

// acquire takes an idle connection or waits for one (see h1Pool).
func (p *h1Pool) acquire(ctx context.Context) (*h1Conn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errH1Closed
	}
	p.closeStaleLocked(time.Now())
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	w := make(chan h1Pick, 1)
	p.waiters = append(p.waiters, w)
	p.dialLocked()
	p.mu.Unlock()
	select {
	case pk := <-w:
		return pk.c, pk.err
	case <-ctx.Done():
		return nil, p.giveUpWaiting(ctx, w)
	}
}

// giveUpWaiting takes w out of the waiters, or puts back the connection it
// was handed as ctx ended.
func (p *h1Pool) giveUpWaiting(ctx context.Context, w chan h1Pick) error {
	p.mu.Lock()
	if i := slices.Index(p.waiters, w); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		p.mu.Unlock()
	} else {
		p.mu.Unlock()
		if pk := <-w; pk.c != nil {
			p.release(pk.c)
		}
	}
	return fmt.Errorf("fcm: waiting for an HTTP/1.1 connection: %w", ctx.Err())
}

// closeStaleLocked closes the connections idle longer than
// idleConnTimeout (a server closes them about then, and a send on one
// would fail).
func (p *h1Pool) closeStaleLocked(now time.Time) {
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].lastUsed) > idleConnTimeout {
		p.idle[n].nc.Close()
		p.idle[n] = nil
		n++
	}
	if n > 0 {
		p.idle = p.idle[n:]
		p.open -= n
	}
}

// dialLocked starts dials while the waiters outnumber the dials under way.
func (p *h1Pool) dialLocked() {
	for !p.closed && len(p.waiters) > p.dialing && p.dialing < h1MaxDials && p.open < p.max {
		p.dialing++
		p.open++
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.dialOne()
		}()
	}
}

func (p *h1Pool) dialOne() {
	p.dials.Add(1)
	nc, err := p.dial(p.ctx, "tcp", p.addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dialing--
	if err != nil {
		p.open--
		// The send waiting longest fails (the engine retries it); the
		// others wait for the dials still under way or for a connection.
		if len(p.waiters) > 0 && len(p.waiters) > p.dialing {
			p.waiters[0] <- h1Pick{err: fmt.Errorf("fcm: dialing %s: %w", p.addr, err)}
			p.waiters = p.waiters[1:]
		}
		p.dialLocked()
		return
	}
	c := &h1Conn{nc: nc, br: bufio.NewReaderSize(nc, h1ReadBufferSize)}
	p.handLocked(c)
	p.dialLocked()
}

// release puts c back: to the send waiting longest, or idle.
func (p *h1Pool) release(c *h1Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.handLocked(c)
}

func (p *h1Pool) handLocked(c *h1Conn) {
	switch {
	case p.closed:
		c.nc.Close()
		p.open--
	case len(p.waiters) > 0:
		p.waiters[0] <- h1Pick{c: c}
		p.waiters[0] = nil
		p.waiters = p.waiters[1:]
	default:
		c.lastUsed = time.Now()
		p.idle = append(p.idle, c)
	}
}

// drop closes c, which carried a request that did not end cleanly.
func (p *h1Pool) drop(c *h1Conn) {
	c.nc.Close()
	p.mu.Lock()
	p.open--
	p.dialLocked() // a send may be waiting for this connection
	p.mu.Unlock()
}

// close closes the idle connections and fails the sends waiting; those in
// flight close theirs when they end.
func (p *h1Pool) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		for _, c := range p.idle {
			c.nc.Close()
		}
		p.open -= len(p.idle)
		p.idle = nil
		for _, w := range p.waiters {
			w <- h1Pick{err: errH1Closed}
		}
		p.waiters = nil
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

var errH1Closed = errors.New("fcm: HTTP/1.1 client closed")

// appendRequest appends the request carrying body to dst.
func (p *h1Pool) appendRequest(dst, body []byte) []byte {
	dst = append(dst, p.head...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\n\r\n"...)
	return append(dst, body...)
}
