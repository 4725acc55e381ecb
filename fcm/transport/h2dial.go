package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"
)

// errNoH2 says the server (or a proxy in between) did not agree to speak
// HTTP/2 over TLS: sends go through net/http instead (HTTP/1.1).
var errNoH2 = errors.New("fcm: the server did not negotiate h2")

// h2Dialer opens the connections of the HTTP/2 client: TCP, through an
// HTTPS_PROXY CONNECT tunnel when the environment names one (as Go's
// transport does, http.ProxyFromEnvironment), then TLS with ALPN "h2", or
// HTTP/2 with prior knowledge (h2c) to a plaintext emulator.
type h2Dialer struct {
	target *url.URL    // the FCM endpoint
	tls    *tls.Config // nil: h2c
	proxy  func(*http.Request) (*url.URL, error)
	dialer net.Dialer
	// handshakeTimeout bounds the proxy's answer and the TLS handshake.
	handshakeTimeout time.Duration
}

func newH2Dialer(target *url.URL, base *tls.Config, h2c bool) *h2Dialer {
	d := &h2Dialer{
		target:           target,
		proxy:            http.ProxyFromEnvironment,
		dialer:           net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		handshakeTimeout: 10 * time.Second,
	}
	if !h2c {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if base != nil {
			cfg = base.Clone()
		}
		cfg.ServerName = target.Hostname()
		cfg.NextProtos = []string{"h2", "http/1.1"}
		d.tls = cfg
	}
	return d
}

// addr is the target's host:port.
func (d *h2Dialer) addr() string {
	if d.target.Port() != "" {
		return d.target.Host
	}
	if d.target.Scheme == "http" {
		return net.JoinHostPort(d.target.Hostname(), "80")
	}
	return net.JoinHostPort(d.target.Hostname(), "443")
}

// dial returns a connection ready for the HTTP/2 preface, or errNoH2 when
// TLS negotiated another protocol.
func (d *h2Dialer) dial(ctx context.Context) (net.Conn, error) {
	proxyURL, err := d.proxy(&http.Request{Method: http.MethodPost, URL: d.target, Header: http.Header{}})
	if err != nil {
		return nil, fmt.Errorf("fcm: choosing a proxy: %w", err)
	}
	var raw net.Conn
	switch {
	case proxyURL != nil && d.tls == nil:
		return nil, errNoH2 // h2c through a proxy: net/http's business
	case proxyURL == nil:
		raw, err = d.dialer.DialContext(ctx, "tcp", d.addr())
		if err != nil {
			return nil, fmt.Errorf("fcm: dialing %s: %w", d.addr(), err)
		}
	default:
		if raw, err = d.connect(ctx, proxyURL); err != nil {
			return nil, err
		}
	}
	if d.tls == nil {
		return raw, nil
	}
	hctx, cancel := context.WithTimeout(ctx, d.handshakeTimeout)
	defer cancel()
	tc := tls.Client(raw, d.tls)
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("fcm: TLS handshake with %s: %w", d.addr(), err)
	}
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		tc.Close()
		return nil, errNoH2
	}
	return tc, nil
}

// connect opens a CONNECT tunnel to the target through an http:// proxy.
// Other proxy schemes are left to net/http (errNoH2).
func (d *h2Dialer) connect(ctx context.Context, proxyURL *url.URL) (net.Conn, error) {
	if proxyURL.Scheme != "http" {
		return nil, errNoH2
	}
	paddr := proxyURL.Host
	if proxyURL.Port() == "" {
		paddr = net.JoinHostPort(proxyURL.Hostname(), "80")
	}
	conn, err := d.dialer.DialContext(ctx, "tcp", paddr)
	if err != nil {
		return nil, fmt.Errorf("fcm: dialing proxy %s: %w", paddr, err)
	}
	deadline := time.Now().Add(d.handshakeTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: d.addr()},
		Host:   d.addr(),
		Header: http.Header{},
	}
	if u := proxyURL.User; u != nil {
		pw, _ := u.Password()
		req.SetBasicAuth(u.Username(), pw)
		req.Header["Proxy-Authorization"] = req.Header["Authorization"]
		delete(req.Header, "Authorization")
	}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("fcm: CONNECT through %s: %w", paddr, err)
	}
	// The proxy says nothing after its answer until the client's TLS
	// hello, so the reader holds no bytes of the tunnel.
	br := bufio.NewReaderSize(conn, 1024)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("fcm: CONNECT through %s: %w", paddr, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, fmt.Errorf("fcm: CONNECT through %s: %s", paddr, resp.Status)
	}
	if br.Buffered() > 0 {
		conn.Close()
		return nil, fmt.Errorf("fcm: CONNECT through %s: the proxy sent data before the TLS handshake", paddr)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}
