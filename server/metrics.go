package server

import (
	"crypto/sha256"
	"net/http"
	"net/http/pprof"
	"slices"

	"github.com/labstack/echo/v4"
)

// The metrics say how much is sent to whom and when, and name the
// deployment's broadcasts' triggers and errors: they are not public. GET
// /metrics on the API's listener takes PUSHFAN_METRICS_TOKEN or an admin
// token as a bearer; PUSHFAN_METRICS_ADDR adds a listener of its own for
// scrapers on a private network.

// metricsTokens may read the metrics: the metrics token (named "metrics",
// a viewer, so it opens nothing else: only this route accepts it) and the
// admin tokens.
func metricsTokens(token string, admin []Token) tokenSet {
	ts := tokenSet{tokens: slices.Clone(admin)}
	if token != "" {
		ts.tokens = append(ts.tokens, Token{Name: "metrics", Role: RoleViewer, Hash: sha256.Sum256([]byte(token))})
	}
	return ts
}

// MetricsServer is the http.Server of PUSHFAN_METRICS_ADDR, which serves
// GET /metrics and Go's profiles under /debug/pprof/ (what an operator
// reads to see where a busy instance spends its CPU and memory): to anyone
// who reaches the address (bind it to a private interface), or, when
// PUSHFAN_METRICS_TOKEN is set, to the tokens the API's /metrics takes.
// The profiles are never on the API's listener. nil when the address is
// not set.
func (s *Server) MetricsServer() *http.Server {
	if s.cfg.MetricsAddr == "" || s.extra.metrics == nil {
		return nil
	}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.IPExtractor = s.auth.proxies.ClientAddr()
	e.HTTPErrorHandler = s.errorHandler
	e.Use(s.requestContext)
	e.Use(s.recoverPanics)
	var auth []echo.MiddlewareFunc
	if s.cfg.Tokens.Metrics != "" {
		auth = append(auth, s.requireBearer(s.auth.metrics, "metrics"))
	}
	e.GET("/metrics", echo.WrapHandler(s.extra.metrics), auth...)
	// pprof.Index serves every named profile (heap, goroutine, allocs, ...)
	// below its prefix; the CPU profile and trace are handlers of their own.
	e.GET("/debug/pprof/*", echo.WrapHandler(http.HandlerFunc(pprof.Index)), auth...)
	e.GET("/debug/pprof/profile", echo.WrapHandler(http.HandlerFunc(pprof.Profile)), auth...)
	e.GET("/debug/pprof/trace", echo.WrapHandler(http.HandlerFunc(pprof.Trace)), auth...)
	return s.httpServer(s.cfg.MetricsAddr, e)
}
