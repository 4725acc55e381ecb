package fcm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
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
// request body until written and at most maxErrorBody of answer (4 KB for a
// success); a 16 KB write buffer and a 16 KB read buffer; the framer's read
// buffer (one frame, at most maxReadFrameSize); the HPACK decoder's table
// (4 KB).

const (
	// streamRecvWindow is the window a stream's answer starts with (the
	// HTTP/2 default); answers past maxErrorBody are dropped as they come.
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
	// writeTimeout bounds one flush: a server that stops reading fails the
	// connection instead of holding the writer.
	writeTimeout = 10 * time.Second
)

// errConnClosed fails the sends of a connection the client closed.
var errConnClosed = errors.New("fcm: HTTP/2 connection closed")

// h2Result is a stream's answer: the status, the headers of an error
// answer, and the body (bounded); or err when there is no answer.
type h2Result struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// h2Stream is one request and its answer. Fields after done are the
// connection's, under its mu (body and sent: the writer's alone).
type h2Stream struct {
	hdr  []byte // the header block, less content-length
	body []byte
	done chan h2Result // cap 1: the one result

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
	fr.MaxHeaderListSize = maxErrorBody
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
	_ = nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := io.WriteString(bw, http2.ClientPreface)
	if err == nil {
		err = fr.WriteSettings(
			http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamRecvWindow},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: maxErrorBody},
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
func (c *h2Conn) cancel(s *h2Stream) (h2Result, bool) {
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
	return h2Result{}, false
}

// endLocked gives s its result and frees its slot; the caller releases the
// slot in the pool once it has let go of c.mu. It reports whether it did.
func (c *h2Conn) endLocked(s *h2Stream, r h2Result) bool {
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
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	err = c.err
	var ended int
	for _, s := range c.streams {
		if c.endLocked(s, h2Result{err: err}) {
			ended++
		}
	}
	for _, s := range c.queue {
		if c.endLocked(s, h2Result{err: err}) {
			ended++
		}
	}
	c.queue = nil
	c.mu.Unlock()
	c.closeOnce.Do(func() {
		close(c.closing)
		c.nc.Close()
	})
	c.pool.retire(c)
	c.pool.forget(c)
	c.pool.releaseN(c, ended)
}

// writeLoop is the connection's one writer (see h2Conn).
func (c *h2Conn) writeLoop() {
	tick := time.NewTicker(pingInterval)
	defer tick.Stop()
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	for {
		select {
		case <-c.closing:
			return
		case <-tick.C:
			if c.checkLiveness() {
				return
			}
		case <-c.wake:
		}
		if err := c.writeBatch(&hbuf, enc); err != nil {
			c.close(fmt.Errorf("fcm: HTTP/2 write: %w", err))
			return
		}
	}
}

// checkLiveness sends a PING to a connection that read nothing for a
// while, closes one that did not answer the last, and closes an idle one.
// It reports whether the connection was closed.
func (c *h2Conn) checkLiveness() bool {
	c.mu.Lock()
	idle := len(c.streams) == 0 && len(c.queue) == 0 && time.Since(c.lastActive) > idleConnTimeout
	read := c.read.Swap(false)
	dead := !read && c.pingOut
	if !read && !c.pingOut {
		c.pingOut = true
	}
	c.mu.Unlock()
	switch {
	case dead:
		c.close(errors.New("fcm: HTTP/2 connection did not answer a PING"))
		return true
	case idle && c.pool.retireIdle(c):
		c.close(errConnClosed)
		return true
	case !read:
		if err := c.fr.WritePing(false, [8]byte{'p', 'u', 's', 'h', 'f', 'a', 'n'}); err == nil {
			_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
			_ = c.bw.Flush()
		}
	}
	return false
}

// dataChunk is a DATA frame the writer may send now.
type dataChunk struct {
	s    *h2Stream
	data []byte
	end  bool
}

// writeBatch writes everything there is to write and flushes once.
func (c *h2Conn) writeBatch(hbuf *bytes.Buffer, enc *hpack.Encoder) error {
	c.mu.Lock()
	acks := c.settingsAck
	c.settingsAck = 0
	pings := c.pingAcks
	c.pingAcks = nil
	rsts := c.rsts
	c.rsts = nil
	wus := c.wus
	c.wus = nil
	open := c.queue
	c.queue = c.spare[:0]
	var opened, later []*h2Stream
	limit := int(c.limit.Load())
	for _, s := range open {
		if s.ended { // its send gave up before it was opened
			continue
		}
		if len(c.streams) >= limit {
			// The server lowered its limit below the streams the pool
			// handed out: open these as others end.
			later = append(later, s)
			continue
		}
		s.id = c.nextID
		c.nextID += 2
		s.sendWin = c.initSendWin
		c.streams[s.id] = s
		opened = append(opened, s)
	}
	c.queue = append(c.queue, later...)
	// Stream ids running out: take no more streams, and close once the
	// ones open are done (as after a GOAWAY).
	spent := c.nextID >= lastStreamID && !c.goingAway
	if spent {
		c.goingAway = true
	}
	// DATA as the windows allow, the streams already waiting first.
	maxFrame := int(c.maxFrame)
	var chunks []dataChunk
	waiting := c.blocked
	c.blocked = nil
	take := func(s *h2Stream) {
		for s.sent < len(s.body) {
			n := min(len(s.body)-s.sent, maxFrame, int(min(s.sendWin, c.connSendWin)))
			if n <= 0 {
				c.blocked = append(c.blocked, s)
				return
			}
			s.sendWin -= int64(n)
			c.connSendWin -= int64(n)
			chunks = append(chunks, dataChunk{s: s, data: s.body[s.sent : s.sent+n], end: s.sent+n == len(s.body)})
			s.sent += n
		}
	}
	for _, s := range waiting {
		if !s.ended {
			take(s)
		}
	}
	for _, s := range opened {
		take(s)
	}
	c.mu.Unlock()
	if spent {
		c.pool.retire(c)
	}
	c.spare = open[:0]
	clear(open[:cap(open)])

	if acks == 0 && len(pings) == 0 && len(rsts) == 0 && len(wus) == 0 && len(opened) == 0 && len(chunks) == 0 {
		return nil
	}
	fr := c.fr
	var err error
	for range acks {
		err = errors.Join(err, fr.WriteSettingsAck())
	}
	for _, p := range pings {
		err = errors.Join(err, fr.WritePing(true, p))
	}
	for _, w := range wus {
		err = errors.Join(err, fr.WriteWindowUpdate(w.id, w.incr))
	}
	for _, r := range rsts {
		err = errors.Join(err, fr.WriteRSTStream(r.id, r.code))
	}
	for _, s := range opened {
		hbuf.Reset()
		hbuf.Write(s.hdr)
		_ = enc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(s.body)), Sensitive: true})
		err = errors.Join(err, c.writeHeaders(s.id, hbuf.Bytes(), len(s.body) == 0, maxFrame))
	}
	for _, ch := range chunks {
		err = errors.Join(err, fr.WriteData(ch.s.id, ch.end, ch.data))
		if ch.end {
			ch.s.body = nil // written: the send's body is no longer held
		}
	}
	if err != nil {
		return err
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	return c.bw.Flush()
}

// writeHeaders writes a header block as HEADERS and as many CONTINUATION
// frames as the server's frame size needs.
func (c *h2Conn) writeHeaders(id uint32, block []byte, endStream bool, maxFrame int) error {
	first := block[:min(len(block), maxFrame)]
	rest := block[len(first):]
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: endStream, EndHeaders: len(rest) == 0})
	for err == nil && len(rest) > 0 {
		frag := rest[:min(len(rest), maxFrame)]
		rest = rest[len(frag):]
		err = c.fr.WriteContinuation(id, len(rest) == 0, frag)
	}
	return err
}

// readLoop is the connection's one reader (see h2Conn).
func (c *h2Conn) readLoop() {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.streamFailed(se.StreamID, se.Code, fmt.Errorf("fcm: HTTP/2 stream: %w", err))
				continue
			}
			c.close(fmt.Errorf("fcm: HTTP/2 read: %w", err))
			return
		}
		c.read.Store(true)
		if err := c.handle(f); err != nil {
			c.close(err)
			return
		}
	}
}

// handle applies one frame from the server; an error fails the
// connection.
func (c *h2Conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		c.onHeaders(f)
	case *http2.DataFrame:
		c.onData(f)
	case *http2.RSTStreamFrame:
		c.streamFailed(f.StreamID, 0, fmt.Errorf("fcm: HTTP/2 stream reset by the server: %v", f.ErrCode))
	case *http2.SettingsFrame:
		if !f.IsAck() {
			return c.onSettings(f)
		}
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.PingFrame:
		c.mu.Lock()
		if f.IsAck() {
			c.pingOut = false
		} else {
			c.pingAcks = append(c.pingAcks, f.Data)
		}
		c.mu.Unlock()
		if !f.IsAck() {
			c.poke()
		}
	case *http2.GoAwayFrame:
		c.onGoAway(f)
	case *http2.PushPromiseFrame:
		return errors.New("fcm: HTTP/2 server pushed with push disabled")
	}
	return nil
}

func (c *h2Conn) onHeaders(f *http2.MetaHeadersFrame) {
	c.mu.Lock()
	s := c.streams[f.StreamID]
	if s == nil { // given up; HPACK state was kept by the framer
		c.mu.Unlock()
		return
	}
	ended := false
	if s.status == 0 {
		status, err := strconv.Atoi(f.PseudoValue("status"))
		switch {
		case err != nil || status < 100:
			ended = c.endLocked(s, h2Result{err: fmt.Errorf("fcm: HTTP/2 answer with a bad :status %q", f.PseudoValue("status"))})
			c.rsts = append(c.rsts, rstFrame{f.StreamID, http2.ErrCodeProtocol})
		case status < 200: // informational; the answer follows
		default:
			s.status = status
			s.respCap = maxErrorBody
			if status < 300 {
				s.respCap = maxSuccessBody
			} else {
				s.header = make(http.Header)
				for _, hf := range f.RegularFields() {
					k := http.CanonicalHeaderKey(hf.Name)
					s.header[k] = append(s.header[k], hf.Value)
				}
			}
		}
	}
	if !ended && f.StreamEnded() {
		if s.status == 0 {
			ended = c.endLocked(s, h2Result{err: errors.New("fcm: HTTP/2 stream ended without an answer")})
		} else {
			ended = c.endLocked(s, h2Result{status: s.status, header: s.header, body: s.resp})
		}
	}
	drained := c.drainedLocked()
	waiting := ended && len(c.queue) > 0
	c.mu.Unlock()
	if waiting {
		c.poke()
	}
	if ended {
		c.pool.release(c)
	}
	if drained {
		c.close(errConnClosed)
	}
}

func (c *h2Conn) onData(f *http2.DataFrame) {
	n := int(f.Header().Length)
	c.mu.Lock()
	c.recvUnack += n
	if c.recvUnack >= connRecvWindow/2 {
		c.wus = append(c.wus, windowUpdate{0, uint32(c.recvUnack)})
		c.recvUnack = 0
	}
	s := c.streams[f.StreamID]
	ended, wake := false, len(c.wus) > 0
	if s != nil {
		if s.status == 0 {
			ended = c.endLocked(s, h2Result{err: errors.New("fcm: HTTP/2 DATA before the answer's headers")})
			c.rsts = append(c.rsts, rstFrame{f.StreamID, http2.ErrCodeProtocol})
			wake = true
		} else {
			if room := s.respCap - len(s.resp); room > 0 {
				d := f.Data()
				s.resp = append(s.resp, d[:min(len(d), room)]...)
			}
			if f.StreamEnded() {
				ended = c.endLocked(s, h2Result{status: s.status, header: s.header, body: s.resp})
			} else if s.recvUnack += n; s.recvUnack >= streamRecvWindow/2 {
				c.wus = append(c.wus, windowUpdate{s.id, uint32(s.recvUnack)})
				s.recvUnack = 0
				wake = true
			}
		}
	}
	drained := c.drainedLocked()
	wake = wake || (ended && len(c.queue) > 0)
	c.mu.Unlock()
	if wake {
		c.poke()
	}
	if ended {
		c.pool.release(c)
	}
	if drained {
		c.close(errConnClosed)
	}
}

// streamFailed ends stream id with err; code, when set, is sent back in a
// RST_STREAM.
func (c *h2Conn) streamFailed(id uint32, code http2.ErrCode, err error) {
	c.mu.Lock()
	s := c.streams[id]
	ended := s != nil && c.endLocked(s, h2Result{err: err})
	if code != 0 {
		c.rsts = append(c.rsts, rstFrame{id, code})
	}
	drained := c.drainedLocked()
	c.mu.Unlock()
	if code != 0 {
		c.poke()
	}
	if ended {
		c.pool.release(c)
	}
	if drained {
		c.close(errConnClosed)
	}
}

func (c *h2Conn) onSettings(f *http2.SettingsFrame) error {
	c.mu.Lock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return fmt.Errorf("fcm: HTTP/2 SETTINGS: %w", err)
		}
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.limit.Store(min(s.Val, maxStreamsPerConn))
			c.pool.streamLimit.Store(min(s.Val, maxStreamsPerConn))
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.initSendWin
			c.initSendWin = int64(s.Val)
			for _, st := range c.streams {
				st.sendWin += delta
			}
		case http2.SettingMaxFrameSize:
			c.maxFrame = s.Val
		}
		return nil
	})
	c.settingsAck++
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.poke()
	c.pool.capacityChanged(c)
	return nil
}

func (c *h2Conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	if f.StreamID == 0 {
		c.connSendWin += int64(f.Increment)
		if c.connSendWin > 1<<31-1 {
			c.mu.Unlock()
			return errors.New("fcm: HTTP/2 connection window overflow")
		}
	} else if s := c.streams[f.StreamID]; s != nil {
		s.sendWin += int64(f.Increment)
	}
	wake := len(c.blocked) > 0
	c.mu.Unlock()
	if wake {
		c.poke()
	}
	return nil
}

// onGoAway stops new streams on the connection; the streams the server
// will not process fail as network errors (the engine sends them again),
// the others run to their end, and then the connection closes.
func (c *h2Conn) onGoAway(f *http2.GoAwayFrame) {
	c.pool.retire(c)
	err := fmt.Errorf("fcm: HTTP/2 GOAWAY (%v): the request was not processed", f.ErrCode)
	c.mu.Lock()
	c.goingAway = true
	var ended int
	for id, s := range c.streams {
		if id > f.LastStreamID && c.endLocked(s, h2Result{err: err}) {
			ended++
		}
	}
	for _, s := range c.queue {
		if c.endLocked(s, h2Result{err: err}) {
			ended++
		}
	}
	c.queue = nil
	drained := len(c.streams) == 0
	c.mu.Unlock()
	c.log.Debug("fcm: HTTP/2 GOAWAY", "code", f.ErrCode.String(), "last_stream", f.LastStreamID, "debug", string(f.DebugData()))
	c.pool.releaseN(c, ended)
	if drained {
		c.close(errConnClosed)
	}
}
