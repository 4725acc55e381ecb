package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The HTTP/2 client's connection. A send costs no goroutine and no pipe:
// it queues its stream and waits on a channel. Per connection, one writer
// goroutine takes every stream queued since its last turn and writes their
// HEADERS and DATA frames into one buffer, flushed once (one TLS record and
// one write for up to 16 KB of frames, some 40 FCM requests), and one
// reader goroutine reads the answers and hands each to its send.
//
// What bounds a connection's memory: its streams (at most the server's
// MAX_CONCURRENT_STREAMS, capped at maxStreamsPerConn), each holding its
// request body until written and at most MaxErrorBody of answer (4 KB for a
// success); a 16 KB write buffer and a 16 KB read buffer; the framer's read
// buffer (one frame, at most maxReadFrameSize); the HPACK decoder's table
// (4 KB).

const (
	// streamRecvWindow is the window a stream's answer starts with (the
	// HTTP/2 default); answers past MaxErrorBody are dropped as they come.
	streamRecvWindow = 65535
	// connRecvWindow is the connection's receive window: every stream can
	// have a full answer under way at once.
	connRecvWindow = 1 << 20
	// maxReadFrameSize is the largest frame the server may send.
	maxReadFrameSize = 16 << 10
	// writeBufferSize is one TLS record's worth of frames.
	writeBufferSize = 16 << 10
	// maxStreamsPerConn caps the server's MAX_CONCURRENT_STREAMS.
	maxStreamsPerConn = 1000
	// pingInterval: a connection with nothing read for this long is sent a
	// PING, and closed if nothing is read for another (a peer or a path
	// that died without a FIN).
	pingInterval = 15 * time.Second
	// idleConnTimeout closes a connection that carried no stream this long.
	idleConnTimeout = 90 * time.Second
	// lastStreamID is where a connection stops opening streams: stream
	// ids are odd and below 2^31, and those of the streams it may still
	// have queued (at most maxStreamsPerConn) must fit. At 16,000 sends a
	// second a connection gets there in about a day.
	lastStreamID = 1<<31 - 1 - 2*maxStreamsPerConn
	// writeTimeout bounds one batch of writes (the pool's writeTimeout):
	// a server that stops reading fails the connection instead of holding
	// the writer.
	writeTimeout = 10 * time.Second
)

// errConnClosed fails the sends of a connection the client closed.
var errConnClosed = errors.New("fcm: HTTP/2 connection closed")

// h2Stream is one request and its answer. Fields after done are the
// connection's, under its mu (body and sent: the writer's alone).
type h2Stream struct {
	hdr  []byte // the header block, less content-length
	body []byte
	conn *h2Conn     // the connection it is queued on
	done chan Result // cap 1: the one result

	id        uint32 // 0 until the writer opens it
	sent      int    // bytes of body written
	sendWin   int64
	recvUnack int
	status    int
	header    http.Header
	resp      []byte
	respCap   int
	ended     bool // result given or send gone: its slot is released
}

type rstFrame struct {
	id   uint32
	code http2.ErrCode
}

type windowUpdate struct {
	id   uint32
	incr uint32
}

// h2Conn is one HTTP/2 connection of an h2Pool.
type h2Conn struct {
	pool *h2Pool
	nc   net.Conn
	bw   *bufio.Writer
	fr   *http2.Framer
	log  *slog.Logger

	limit atomic.Uint32 // streams the server allows at once
	read  atomic.Bool   // a frame was read since the last liveness check

	wake      chan struct{} // cap 1: the writer has work
	closing   chan struct{}
	closeOnce sync.Once

	mu          sync.Mutex
	err         error // set once the connection failed: sends fail with it
	streams     map[uint32]*h2Stream
	queue       []*h2Stream // to open
	spare       []*h2Stream // the writer's other queue slice, reused
	blocked     []*h2Stream // opened, body waiting for window
	nextID      uint32
	connSendWin int64
	initSendWin int64
	maxFrame    uint32
	goingAway   bool
	recvUnack   int
	settingsAck int
	pingAcks    [][8]byte
	rsts        []rstFrame
	wus         []windowUpdate
	pingOut     bool
	lastActive  time.Time
}

// startH2Conn writes the preface over nc and starts the connection's
// reader and writer, counted in wg.
func startH2Conn(p *h2Pool, nc net.Conn, wg *sync.WaitGroup) (*h2Conn, error) {
	bw := bufio.NewWriterSize(nc, writeBufferSize)
	fr := http2.NewFramer(bw, bufio.NewReaderSize(nc, 16<<10))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = MaxErrorBody
	fr.SetMaxReadFrameSize(maxReadFrameSize)
	fr.SetReuseFrames()
	c := &h2Conn{
		pool: p, nc: nc, bw: bw, fr: fr, log: p.log,
		wake:        make(chan struct{}, 1),
		closing:     make(chan struct{}),
		streams:     make(map[uint32]*h2Stream),
		nextID:      1,
		connSendWin: 65535,
		initSendWin: 65535,
		maxFrame:    16384,
		lastActive:  time.Now(),
	}
	// Until the server's SETTINGS say otherwise, what the last connection's
	// said (FCM's limit does not change from one connection to the next).
	c.limit.Store(p.streamLimit.Load())
	_ = nc.SetWriteDeadline(time.Now().Add(p.writeTimeout))
	_, err := io.WriteString(bw, http2.ClientPreface)
	if err == nil {
		err = fr.WriteSettings(
			http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamRecvWindow},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: MaxErrorBody},
		)
	}
	if err == nil {
		err = fr.WriteWindowUpdate(0, connRecvWindow-65535)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("fcm: HTTP/2 preface: %w", err)
	}
	wg.Add(2)
	go func() { defer wg.Done(); c.readLoop() }()
	go func() { defer wg.Done(); c.writeLoop() }()
	return c, nil
}

// enqueue hands s to the writer; the caller holds a slot of c.
func (c *h2Conn) enqueue(s *h2Stream) error {
	c.mu.Lock()
	if c.err != nil || c.goingAway {
		err := c.err
		if err == nil {
			err = errors.New("fcm: HTTP/2 connection going away: the request was not sent")
		}
		c.mu.Unlock()
		return err
	}
	c.queue = append(c.queue, s)
	c.mu.Unlock()
	c.poke()
	return nil
}

func (c *h2Conn) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// cancel gives up s (its send's context ended). It returns s's result when
// the answer came first.
func (c *h2Conn) cancel(s *h2Stream) (Result, bool) {
	c.mu.Lock()
	if s.ended {
		c.mu.Unlock()
		return <-s.done, true
	}
	s.ended = true
	if s.id != 0 {
		delete(c.streams, s.id)
		c.rsts = append(c.rsts, rstFrame{s.id, http2.ErrCodeCancel})
	} // else the writer drops it from the queue
	drained := c.drainedLocked()
	c.mu.Unlock()
	c.poke()
	c.pool.release(c)
	if drained {
		c.close(errConnClosed)
	}
	return Result{}, false
}

// endLocked gives s its result and frees its slot; the caller releases the
// slot in the pool once it has let go of c.mu. It reports whether it did.
func (c *h2Conn) endLocked(s *h2Stream, r Result) bool {
	if s.ended {
		return false
	}
	s.ended = true
	if s.id != 0 {
		delete(c.streams, s.id)
	}
	s.done <- r
	c.lastActive = time.Now()
	return true
}

// drainedLocked reports whether a connection going away has no stream
// left, and is to be closed.
func (c *h2Conn) drainedLocked() bool {
	return c.goingAway && c.err == nil && len(c.streams) == 0
}

// close shuts the connection now; its sends fail with err.
func (c *h2Conn) close(err error) {
	// Out of the pool first: a send that sees its stream fail must not be
	// handed this connection again when it retries at once.
	c.pool.retire(c)
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	err = c.err
	var ended int
	for _, s := range c.streams {
		if c.endLocked(s, Result{Err: err}) {
			ended++
		}
	}
	for _, s := range c.queue {
		if c.endLocked(s, Result{Err: err}) {
			ended++
		}
	}
	c.queue = nil
	c.mu.Unlock()
	c.closeOnce.Do(func() {
		close(c.closing)
		c.nc.Close()
	})
	c.pool.forget(c)
	c.pool.releaseN(c, ended)
}
