// Package proxies holds the trusted reverse proxies of
// PUSHFAN_TRUSTED_PROXIES: which connections come through one, the
// client address behind it, and whether the client used TLS. Only their
// X-Forwarded-For and X-Forwarded-Proto headers are believed, since
// anyone can write those headers.
package proxies

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"
)

// Trusted are the reverse proxies' networks.
type Trusted []*net.IPNet

// Parse reads the proxies' CIDRs; config's validation has refused any
// that do not parse, so those are skipped.
func Parse(cidrs []string) Trusted {
	var out Trusted
	for _, p := range cidrs {
		if _, n, err := net.ParseCIDR(p); err == nil { // Validate refused the others
			out = append(out, n)
		}
	}
	return out
}

// Trusts reports whether remoteAddr (a connection's host:port) is one of
// the proxies.
func (tp Trusted) Trusts(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	ip := net.IP(ap.Addr().Unmap().AsSlice())
	for _, n := range tp {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// ClientAddr is how the client's address is read (it keys the failed
// authentication budget): the connection's, or X-Forwarded-For's behind
// the proxies only.
func (tp Trusted) ClientAddr() echo.IPExtractor {
	if len(tp) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range tp {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// OverTLS reports whether the client reached pushfan over TLS (the
// session cookie is Secure then): the connection's own TLS, or behind a
// trusted proxy its X-Forwarded-Proto. The last value is the one the
// proxy next to pushfan wrote; anything before it may come from the
// client.
func (tp Trusted) OverTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !tp.Trusts(r.RemoteAddr) {
		return false
	}
	proto := r.Header.Get(echo.HeaderXForwardedProto)
	if i := strings.LastIndexByte(proto, ','); i >= 0 {
		proto = proto[i+1:]
	}
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}
