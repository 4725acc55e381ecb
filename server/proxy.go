package server

import (
	"net"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"
)

// trustedProxies are the reverse proxies of PUSHFAN_TRUSTED_PROXIES: only
// their X-Forwarded-For and X-Forwarded-Proto headers are believed, since
// anyone can write those headers.
type trustedProxies []*net.IPNet

func parseProxies(cidrs []string) trustedProxies {
	var out trustedProxies
	for _, p := range cidrs {
		if _, n, err := net.ParseCIDR(p); err == nil { // Validate refused the others
			out = append(out, n)
		}
	}
	return out
}

// trusts reports whether remoteAddr (a connection's host:port) is one of
// the proxies.
func (tp trustedProxies) trusts(remoteAddr string) bool {
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

// clientAddr is how the client's address is read (it keys the failed
// authentication budget): the connection's, or X-Forwarded-For's behind
// the proxies only.
func (tp trustedProxies) clientAddr() echo.IPExtractor {
	if len(tp) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range tp {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// overTLS reports whether the client reached pushfan over TLS (the session
// cookie is Secure then): the connection's own TLS, or behind a trusted
// proxy its X-Forwarded-Proto. The last value is the one the proxy next to
// pushfan wrote; anything before it may come from the client.
func (s *Server) overTLS(c echo.Context) bool {
	r := c.Request()
	if r.TLS != nil {
		return true
	}
	if !s.auth.proxies.trusts(r.RemoteAddr) {
		return false
	}
	proto := r.Header.Get(echo.HeaderXForwardedProto)
	if i := strings.LastIndexByte(proto, ','); i >= 0 {
		proto = proto[i+1:]
	}
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}
