package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
)

// How much of an answer's body a Result keeps: a success's (FCM's is a
// short {"name": ...}, under 100 bytes) and any other (an error's JSON,
// which the caller reads for its status and details).
const (
	MaxSuccessBody = 4 << 10
	MaxErrorBody   = 64 << 10
)

// Options says where a Client sends and over what.
type Options struct {
	// URL is where every request goes: a POST of the body given to
	// Start.
	URL string
	// Header is sent with every request. It is shared by every request
	// and never modified.
	Header http.Header
	// Auth, when not nil, is an authenticating transport on top of
	// HeaderRecorder: the HTTP/2 client takes the headers it adds
	// (Authorization above all) through it every few seconds. Fallback
	// is then expected to send through it too.
	Auth http.RoundTripper
	// TLS holds the roots to trust the server with (nil: the system's);
	// the dialer sets the server name and ALPN on a copy.
	TLS *tls.Config
	// HTTP2 says the server speaks HTTP/2: over TLS, negotiated by ALPN,
	// or, with H2C, with prior knowledge to an http:// URL. Without it,
	// requests to an http:// URL go over the HTTP/1.1 client.
	HTTP2 bool
	H2C   bool
	// NetHTTP leaves every request to Fallback: pushfan's own clients
	// are not used.
	NetHTTP bool
	// Fallback carries the requests pushfan's clients do not: every one
	// with NetHTTP, every one once a TLS server did not negotiate h2, and
	// those to an http:// URL the environment sends through a proxy.
	Fallback *http.Client
	// Concurrency is how many requests are expected in flight at once: it
	// bounds the connections (HTTP/2: Concurrency/100 + 1; HTTP/1.1:
	// Concurrency + 16).
	Concurrency int
	// Log gets the warnings (a failed dial); nil discards them.
	Log *slog.Logger
}

// Client sends prepared request bodies to one URL, over pushfan's HTTP/2
// client (h2*.go), its HTTP/1.1 client (h1*.go), or Options.Fallback, and
// hands each answer to its finish function, whose T a send's Wait returns.
type Client[T any] struct {
	url      string
	header   http.Header
	fallback *http.Client
	finish   func(context.Context, Result) T
	// h2, when not nil, carries the requests until the server turns out
	// not to speak HTTP/2.
	h2 *h2Pool
	// h1, when not nil, carries the requests to a plain http:// URL.
	h1 *h1Pool
}

// New builds the client o describes. It dials nothing: the first request
// does. finish turns a request's Result into what its Wait returns (fcm:
// the classified outcome); it runs in Wait, after the wait, with Wait's
// ctx. Taking it here rather than wrapping Pending keeps the caller's
// frame off the stack of every parked request (see Start).
func New[T any](o Options, finish func(ctx context.Context, r Result) T) (*Client[T], error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client[T]{url: o.URL, header: o.Header, fallback: o.Fallback, finish: finish}
	switch {
	case o.NetHTTP:
	case o.HTTP2:
		u, err := url.Parse(o.URL)
		if err != nil {
			return nil, fmt.Errorf("fcm: endpoint: %w", err)
		}
		dialer := newH2Dialer(u, o.TLS, o.H2C && u.Scheme == "http")
		c.h2 = newH2Pool(dialer, newH2Headers(u, o.Header, o.Auth), o.Concurrency, log)
	case !proxied(o.URL):
		h1, err := newH1Pool(o.URL, o.Header, o.Concurrency)
		if err != nil {
			return nil, err
		}
		c.h1 = h1
	}
	return c, nil
}

// Result is the answer to one request: its status, the headers of an
// answer other than 2xx (a 2xx's are not kept), and the body, up to
// MaxSuccessBody for a 2xx and MaxErrorBody for any other; or Err when
// there is no answer. Err with the request's context ended is the
// context's doing; any other Err is the network's, and the request may
// or may not have reached the server.
type Result struct {
	Status int
	Header http.Header
	Body   []byte
	Err    error
}

// Pending is a request under way.
type Pending[T any] interface {
	// Wait returns the finished Result of the request, or gives the
	// request up when ctx ends first. It is called once, with Start's
	// ctx.
	Wait(ctx context.Context) T
}

// Start sends body as one request and returns without waiting for the
// answer: the caller's goroutine goes through the deep part of the send
// (a connection, the queue or the write) here and returns from it, so that
// it parks in Wait with a shallow stack (thousands of requests wait at
// once; a goroutine parked at the bottom of the send path keeps an 8 KB
// stack, one parked in Wait 4 KB). Over Fallback the request is made in
// Wait. body must not change until Wait returns. A request that fails
// before it leaves is finished here, with ctx as it is now.
func (c *Client[T]) Start(ctx context.Context, body []byte) Pending[T] {
	if h2 := c.h2; h2 != nil && !h2.noH2.Load() {
		s := &h2Send[T]{h2Stream: h2Stream{body: body}, finish: c.finish}
		err := h2.start(ctx, &s.h2Stream)
		if err == nil {
			return s
		}
		if !errors.Is(err, errNoH2) {
			return &ended[T]{c.finish(ctx, Result{Err: err})}
		}
	}
	if h1 := c.h1; h1 != nil {
		s, err := startH1(ctx, h1, body, c.finish)
		if err != nil {
			return &ended[T]{c.finish(ctx, Result{Err: err})}
		}
		return s
	}
	return &netHTTPSend[T]{c: c, body: body}
}

// Close closes the HTTP/2 and HTTP/1.1 clients' connections and returns
// when their goroutines have ended; requests in flight fail. Fallback is
// the caller's to close. Close may be called more than once.
func (c *Client[T]) Close() {
	if c.h2 != nil {
		c.h2.close()
	}
	if c.h1 != nil {
		c.h1.close()
	}
}

// Carrier names the client that carries the requests now: "h2", "h1" or
// "net/http" (Fallback).
func (c *Client[T]) Carrier() string {
	switch {
	case c.h2 != nil && !c.h2.noH2.Load():
		return "h2"
	case c.h1 != nil:
		return "h1"
	}
	return "net/http"
}

// ended is a request that ended before it was started.
type ended[T any] struct{ v T }

func (e *ended[T]) Wait(context.Context) T { return e.v }

// netHTTPSend is a request over Fallback, made in Wait.
type netHTTPSend[T any] struct {
	c    *Client[T]
	body []byte
}

func (n *netHTTPSend[T]) Wait(ctx context.Context) T {
	return n.c.finish(ctx, n.c.sendNetHTTP(ctx, n.body))
}

// sendNetHTTP makes the request through Fallback and reads its answer as
// the HTTP/2 and HTTP/1.1 clients do.
func (c *Client[T]) sendNetHTTP(ctx context.Context, body []byte) Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return Result{Err: &RequestError{Err: err}}
	}
	req.Header = c.header
	resp, err := c.fallback.Do(req)
	if err != nil {
		return Result{Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// Read to the end so the connection is reused; an endless body
		// only costs its connection.
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxSuccessBody))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxErrorBody))
		return Result{Status: resp.StatusCode, Header: resp.Header, Body: raw}
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
	if err != nil && ctx.Err() != nil {
		return Result{Err: err}
	}
	// A body cut short otherwise is read as far as it came.
	return Result{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// RequestError is a request that could not be made at all (a URL
// net/http does not take): none left, and none would. It reads as the
// error it holds.
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return e.Err.Error() }

func (e *RequestError) Unwrap() error { return e.Err }

// proxied reports whether the environment sends requests to rawURL
// through a proxy (net/http then carries them: the HTTP/1.1 client dials
// the endpoint itself).
func proxied(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return true
	}
	proxy, err := http.ProxyFromEnvironment(&http.Request{URL: u})
	return err != nil || proxy != nil
}
