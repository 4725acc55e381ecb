package transport

import (
	"context"
	"fmt"
	"time"
)

// h1Send is a request written on its connection, waiting for the answer
// (a Pending).
type h1Send[T any] struct {
	p      *h1Pool
	c      *h1Conn
	stop   func() bool // ends the watch on the send's context
	finish func(context.Context, Result) T
}

// maxPooledRequest: a request buffer grown past it (a message near FCM's
// 4 KB limit is smaller) is not kept.
const maxPooledRequest = 8 << 10

// startH1 writes body as one request and returns without reading the
// answer: the send's goroutine returns from the deep part (a connection,
// the write) and parks in Wait with a shallow stack (see Client.Start).
func startH1[T any](ctx context.Context, p *h1Pool, body []byte, finish func(context.Context, Result) T) (*h1Send[T], error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	// ctx ending interrupts the write or the read (a deadline in the
	// past); the connection is then dropped, as an answer may still come
	// on it.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	bp, _ := p.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	*bp = p.appendRequest((*bp)[:0], body)
	_, err = c.nc.Write(*bp)
	if cap(*bp) <= maxPooledRequest {
		p.bufs.Put(bp)
	}
	if err != nil {
		stop()
		p.drop(c)
		return nil, fmt.Errorf("fcm: writing the request: %w", err)
	}
	return &h1Send[T]{p: p, c: c, stop: stop, finish: finish}, nil
}

// Wait returns the finished answer to the request (Pending). It parks in
// ready, the shallowest way down to the socket; the frames that read and
// finish the answer come after, so that the parked stack fits in 4 KB
// (see Client.Start).
func (s *h1Send[T]) Wait(ctx context.Context) T {
	if err := s.ready(); err != nil {
		return s.failed(ctx, err)
	}
	return s.answer(ctx)
}

// ready waits for the answer to start.
func (s *h1Send[T]) ready() error {
	_, err := s.c.br.Peek(1)
	return err
}

//go:noinline
func (s *h1Send[T]) failed(ctx context.Context, err error) T {
	s.end(false)
	return s.finish(ctx, Result{Err: fmt.Errorf("fcm: waiting for the answer: %w", err)})
}

// answer reads the answer: the status, an error answer's headers, and the
// body up to MaxSuccessBody (a success) or MaxErrorBody. The connection is
// reused when the answer was read to its end and the server keeps it.
// (h1answer.go reads it by hand: http.ReadResponse's frames, on top of a
// worker's, grew every worker's stack to 8 KB.)
//
//go:noinline
func (s *h1Send[T]) answer(ctx context.Context) T {
	a, err := readH1Answer(s.c.br)
	if err != nil {
		s.end(false)
		return s.finish(ctx, Result{Err: fmt.Errorf("fcm: reading the answer: %w", err)})
	}
	s.end(a.reuse)
	return s.finish(ctx, Result{Status: a.status, Header: a.header, Body: a.body})
}

// end gives the connection back, or closes it.
func (s *h1Send[T]) end(reuse bool) {
	if !s.stop() {
		reuse = false // ctx ended: the deadline is set, or about to be
	}
	if reuse {
		s.p.release(s.c)
	} else {
		s.p.drop(s.c)
	}
}
