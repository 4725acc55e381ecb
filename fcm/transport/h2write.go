package transport

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

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
		// The deadline first: the last one set may have passed long ago,
		// and the frame can reach the socket before the flush (the
		// buffer is flushed as it fills).
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.pool.writeTimeout))
		if err := c.fr.WritePing(false, [8]byte{'p', 'u', 's', 'h', 'f', 'a', 'n'}); err == nil {
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
	// One deadline for the whole batch, set before its first frame: the
	// buffer flushes to the socket as it fills (a batch is often several
	// times its 16 KB), and the deadline of the last batch may have
	// passed long ago, which would fail the first write of this one.
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.pool.writeTimeout))
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
