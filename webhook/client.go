package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrPrivateAddress: an endpoint resolved to an address webhooks may not
// reach (PUSHFAN_WEBHOOK_ALLOW_PRIVATE is off).
var ErrPrivateAddress = errors.New("webhook: the endpoint's address is private, loopback or link-local")

// NewClient is the HTTP client deliveries use: a timeout per request, no
// redirect followed (a 3xx is a failed attempt: the receiver must answer
// itself), and unless allowPrivate a dialer that refuses private,
// loopback, link-local and unspecified addresses. The check runs on the
// address being connected to, after resolution, so a name that resolves
// to a public address for the check and a private one for the connection
// (DNS rebinding) cannot pass.
func NewClient(timeout time.Duration, allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("webhook: dialing %q: %w", address, err)
			}
			if private(ap.Addr()) {
				return fmt.Errorf("%w: %s", ErrPrivateAddress, ap.Addr())
			}
			return nil
		}
	}
	t := &http.Transport{
		Proxy:                 nil, // a proxy would hide the address the check must see
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{
		Transport:     t,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// private reports addresses a webhook may not reach by default.
func private(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast() ||
		// 100.64.0.0/10, carrier-grade NAT: private in practice.
		netip.MustParsePrefix("100.64.0.0/10").Contains(a)
}
