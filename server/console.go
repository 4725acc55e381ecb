package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"pushfan/console"
	"pushfan/model"
	"pushfan/server/live"
)

// consoleParts are the console's: its sessions (nil: no sign-in), the
// live-watch streams, the cluster view (nil: none) and the sign-in
// through an OIDC provider (nil: none).
type consoleParts struct {
	sessions SessionStore
	watch    *live.Hub
	cluster  func(ctx context.Context, app string) (model.Cluster, error)
	// oidc is sign-in through an OIDC provider (nil: none).
	oidc *oidcParts
}

// consoleCSP keeps the console to its own files: no inline script or
// style, no third-party hosts (it must work with no internet), and no
// framing. Images may come from anywhere: the phone preview shows the
// message's image URL.
const consoleCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https: http:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// routeConsole serves the console at /console/ (and sends / there), and
// its session routes under /console/api.
func (s *Server) routeConsole(e *echo.Echo) {
	files := console.Assets()
	toConsole := func(c echo.Context) error { return c.Redirect(http.StatusFound, "/console/") }
	e.GET("/", toConsole)
	e.GET("/console", toConsole)
	e.GET("/console/*", func(c echo.Context) error {
		name := c.Param("*")
		if name == "" || strings.HasSuffix(name, "/") {
			name += "index.html"
		}
		h := c.Response().Header()
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		// Revalidate every time: a new binary's files must replace the old.
		h.Set("Cache-Control", "no-cache")
		// FileFS opens through io/fs, which refuses ".." and absolute names.
		return echo.StaticFileHandler(name, files)(c)
	})
	// Sign-out is recorded (audit's table); sign-ins record themselves.
	api := e.Group("/console/api", s.auditChanges())
	api.POST("/session", s.signIn)
	api.GET("/session", s.whoAmI)
	api.DELETE("/session", s.signOut)
	e.GET("/console/oidc/login", s.oidcLogin)
	e.GET("/console/oidc/callback", s.oidcCallback)
}
