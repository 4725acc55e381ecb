package transport

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"golang.org/x/net/http2"
)

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
			ended = c.endLocked(s, Result{Err: fmt.Errorf("fcm: HTTP/2 answer with a bad :status %q", f.PseudoValue("status"))})
			c.rsts = append(c.rsts, rstFrame{f.StreamID, http2.ErrCodeProtocol})
		case status < 200: // informational; the answer follows
		default:
			s.status = status
			s.respCap = MaxErrorBody
			if status < 300 {
				s.respCap = MaxSuccessBody
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
			ended = c.endLocked(s, Result{Err: errors.New("fcm: HTTP/2 stream ended without an answer")})
		} else {
			ended = c.endLocked(s, Result{Status: s.status, Header: s.header, Body: s.resp})
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
			ended = c.endLocked(s, Result{Err: errors.New("fcm: HTTP/2 DATA before the answer's headers")})
			c.rsts = append(c.rsts, rstFrame{f.StreamID, http2.ErrCodeProtocol})
			wake = true
		} else {
			if room := s.respCap - len(s.resp); room > 0 {
				d := f.Data()
				s.resp = append(s.resp, d[:min(len(d), room)]...)
			}
			if f.StreamEnded() {
				ended = c.endLocked(s, Result{Status: s.status, Header: s.header, Body: s.resp})
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
	ended := s != nil && c.endLocked(s, Result{Err: err})
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
		if id > f.LastStreamID && c.endLocked(s, Result{Err: err}) {
			ended++
		}
	}
	for _, s := range c.queue {
		if c.endLocked(s, Result{Err: err}) {
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
