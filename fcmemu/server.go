package fcmemu

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Mode is the wire protocol a server speaks.
type Mode string

const (
	// ModeHTTP1 is plain HTTP/1.1, the default.
	ModeHTTP1 Mode = "http1"
	// ModeH2C is HTTP/2 without TLS (prior knowledge), plus HTTP/1.1 on the same port.
	ModeH2C Mode = "h2c"
	// ModeTLS is HTTPS with HTTP/2 negotiated by ALPN (HTTP/1.1 as fallback), like FCM, using a
	// self-signed certificate generated at start.
	ModeTLS Mode = "tls"
)

// ServerOptions shape the server NewServer and Serve build.
type ServerOptions struct {
	// Mode is the protocol; empty means ModeHTTP1.
	Mode Mode
	// CertHosts are the names the TLS certificate is valid for (DefaultCertHosts if empty).
	CertHosts []string
	// Certificate, when set in ModeTLS, is served instead of a freshly generated one: a caller
	// that wants the CA before serving calls GenerateCert itself.
	Certificate *tls.Certificate
	// CAOut, when set in ModeTLS with a generated certificate, is a file the CA certificate (PEM)
	// is written to by NewServer, so another process can trust the emulator.
	CAOut string
	// MaxConcurrentStreams is the HTTP/2 per-connection stream limit advertised (default 100,
	// what Google front ends are commonly observed to advertise), so clients meet the same
	// multiplexing limit as with FCM.
	MaxConcurrentStreams int
	// ShutdownTimeout bounds the graceful part of Serve's shutdown (default 5s).
	ShutdownTimeout time.Duration
}

// ConnState counts connections into Stats. NewServer installs it; a caller building its own
// server (httptest.NewUnstartedServer(e.Handler())) can set Config.ConnState = e.ConnState.
func (e *Emulator) ConnState(_ net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		e.stats.connsAccepted.Add(1)
		e.stats.connsOpen.Add(1)
	case http.StateClosed, http.StateHijacked:
		e.stats.connsOpen.Add(-1)
	}
}

// NewServer returns a server for e on addr, configured for opts.Mode, counting connections, with
// timeouts that protect the emulator from stuck clients but no WriteTimeout: hang- tokens and
// large latencies must be able to outlast any fixed write deadline. In ModeTLS the certificate is
// generated (and written to opts.CAOut) here; serve with ServeTLS(ln, "", "") or
// ListenAndServeTLS("", ""). Shutting the server down releases hanging requests.
func (e *Emulator) NewServer(addr string, opts ServerOptions) (*http.Server, error) {
	drain := make(chan struct{})
	var once sync.Once
	srv := &http.Server{
		Addr:              addr,
		Handler:           e.handler,
		ConnState:         e.ConnState,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.Background(), drainKey{}, drain)
		},
		// net/http's own complaints (handshake errors of test clients...) go to the injected
		// logger at debug level rather than to the process's standard log.
		ErrorLog: slog.NewLogLogger(e.log.Handler(), slog.LevelDebug),
	}
	srv.RegisterOnShutdown(func() { once.Do(func() { close(drain) }) })

	streams := opts.MaxConcurrentStreams
	if streams <= 0 {
		streams = 100
	}
	var p http.Protocols
	p.SetHTTP1(true)
	switch opts.Mode {
	case "", ModeHTTP1:
	case ModeH2C:
		p.SetUnencryptedHTTP2(true)
		srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: streams}
	case ModeTLS:
		p.SetHTTP2(true)
		srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: streams}
		var cert tls.Certificate
		if opts.Certificate != nil {
			cert = *opts.Certificate
		} else {
			var caPEM []byte
			var err error
			if cert, caPEM, err = GenerateCert(opts.CertHosts); err != nil {
				return nil, fmt.Errorf("tls certificate: %w", err)
			}
			if opts.CAOut != "" {
				if err := os.WriteFile(opts.CAOut, caPEM, 0o644); err != nil {
					return nil, fmt.Errorf("writing CA to %s: %w", opts.CAOut, err)
				}
			}
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	default:
		return nil, fmt.Errorf("unknown server mode %q (want %s, %s or %s)", opts.Mode, ModeHTTP1, ModeH2C, ModeTLS)
	}
	srv.Protocols = &p
	return srv, nil
}

// Serve serves e on ln until ctx is done, then shuts down gracefully: it stops accepting,
// releases hanging requests (they answer 503), and waits up to opts.ShutdownTimeout for
// requests in flight before closing what is left. It returns nil after a clean shutdown.
// Serve builds the server in its own goroutine's time: in ModeTLS, pass opts.Certificate (from
// GenerateCert) to hold the CA before serving, or use NewServer, which writes opts.CAOut before
// returning.
func (e *Emulator) Serve(ctx context.Context, ln net.Listener, opts ServerOptions) error {
	srv, err := e.NewServer(ln.Addr().String(), opts)
	if err != nil {
		ln.Close()
		return err
	}
	return runServer(ctx, srv, ln, opts.ShutdownTimeout)
}

// runServer serves srv on ln until ctx is done, then shuts it down (see Serve).
func runServer(ctx context.Context, srv *http.Server, ln net.Listener, timeout time.Duration) error {
	errc := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("graceful shutdown: %w", err), srv.Close())
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("serving on %s: %w", ln.Addr(), serr))
	}
	return err
}
