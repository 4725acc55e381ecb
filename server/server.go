// Package server is pushfan's HTTP API on Echo, and HTTP only: routes,
// auth, strict decoding, calls into the domain (whose request rules
// validate), rendering, and the one error handler that maps typed errors
// (a *rules.FieldError is a 400 naming the field) to the contract's
// JSON. It reaches the domain through the small interfaces it declares
// (domain.go) and reads only its own settings (Config): package app wires
// both, and the contract tests run it against fakes.
package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"pushfan/broadcast"
	"pushfan/cron"
	"pushfan/engagement"
	"pushfan/fcm"
	"pushfan/internal/platform/logging"
	"pushfan/model"
	"pushfan/server/audittrail"
	"pushfan/server/campaigns"
	"pushfan/server/consents"
	"pushfan/server/deliveries"
	"pushfan/server/jobs"
	"pushfan/server/keys"
	"pushfan/server/live"
	"pushfan/server/openapi"
	"pushfan/server/proxies"
	"pushfan/server/schedule"
	"pushfan/server/segments"
	"pushfan/server/webhooks"
	"pushfan/webhook"
)

// Pinger reports whether the database answers (readiness).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Server holds the API's dependencies.
type Server struct {
	cfg  Config
	dom  Domain
	db   Pinger
	log  *slog.Logger
	now  func() time.Time
	echo *echo.Echo

	auth    authParts
	console consoleParts
	extra   extras
	// audit records sign-ins (nil: no audit trail).
	audit Auditor
	// openAPIDoc is GET /openapi.json's body, copied once.
	openAPIDoc []byte
}

// extras are the routes beside the broadcasts', each nil when not
// configured: GET /metrics (a Prometheus handler), the apps' public event
// routes, and the webhook endpoints' health.
type extras struct {
	metrics  http.Handler
	events   *engagement.Ingester
	webhooks *webhook.Deliverer
}

// Option adjusts a Server.
type Option func(*Server)

// WithMetrics serves h (a Prometheus handler) at GET /metrics, to the
// metrics token and the admin tokens (and on PUSHFAN_METRICS_ADDR: see
// MetricsServer).
func WithMetrics(h http.Handler) Option { return func(s *Server) { s.extra.metrics = h } }

// New wires the routes: cfg's values must be valid (package app builds
// them from a validated configuration), and d's Submitter, Reader and
// Tester serve the routes that call the domain.
func New(cfg Config, d Domain, db Pinger, log *slog.Logger, opts ...Option) *Server {
	s := &Server{cfg: cfg, dom: d, db: db, log: log, now: time.Now, openAPIDoc: openapi.Document()}
	s.auth.admin = tokenSet{tokens: cfg.Tokens.Admin, keys: d.Keys}
	if cfg.Tokens.Internal != "" {
		s.auth.internal = tokenSet{tokens: []Token{{Name: "internal", Role: RoleSender, Hash: sha256.Sum256([]byte(cfg.Tokens.Internal))}}}
	}
	for _, o := range opts {
		o(s)
	}
	// Burst: a minute's worth, so a mistyped paste or two costs nothing.
	s.auth.failures = newAuthFailures(cfg.Limits.SignInFailuresPerMinute)
	s.auth.proxies = proxies.Parse(cfg.TrustedProxies)
	s.auth.metrics = metricsTokens(cfg.Tokens.Metrics, cfg.Tokens.Admin)
	// The hub reads through s when a stream opens, not before: a Server
	// built with no Reader (the route listing's) serves every other route.
	s.console.watch = live.New(func(ctx context.Context, id uint64) (*model.Broadcast, error) { return s.dom.Reader.Peek(ctx, id) }, s.view, broadcast.ErrNotFound, log)
	s.console.watch.History = func(ctx context.Context, id uint64, since time.Time) ([]model.SeriesPoint, time.Duration, error) {
		return s.dom.Reader.SendRate(ctx, id, since)
	}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.IPExtractor = s.auth.proxies.ClientAddr()
	e.HTTPErrorHandler = s.errorHandler
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator:        newRequestID,
		RequestIDHandler: func(c echo.Context, id string) {},
	}))
	e.Use(s.requestContext)
	e.Use(s.recoverPanics)
	e.Use(middleware.BodyLimit(fmt.Sprintf("%dB", cfg.Limits.Body)))

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.json", s.openAPI)
	if s.extra.metrics != nil {
		e.GET("/metrics", echo.WrapHandler(s.extra.metrics), s.requireBearer(s.auth.metrics, "metrics"))
	}

	s.routeConsole(e)
	s.routeEvents(e)
	s.routePush(e)

	internal := e.Group("/internal", s.requireBearer(s.auth.internal, "internal"), s.auditChanges())
	s.jobRoutes().RegisterTrigger(internal)
	s.echo = e
	return s
}

// routePush serves the admin API under /push.
func (s *Server) routePush(e *echo.Echo) {
	push := e.Group("/push", s.requireAdmin, s.auditChanges())
	// A resend creates a broadcast too: one submit budget per token for both.
	submits := newSubmitLimiter(s.cfg.Limits.SubmitsPerMinute, "broadcasts")
	push.POST("/broadcast", s.createBroadcast, submits.middleware)
	// One test-send budget per token, for messages and stored broadcasts.
	tests := newSubmitLimiter(s.cfg.Limits.TestSendsPerMinute, "test sends")
	push.POST("/test", s.testSend, tests.middleware)
	// A token limited to some apps reaches their broadcasts only
	// (broadcastApp), and sees their lists and counts only (appFilter).
	push.POST("/broadcasts/:id/test", s.testSendBroadcast, s.broadcastApp, tests.middleware)
	push.GET("/broadcasts", s.listBroadcasts)
	push.GET("/broadcasts/:id", s.getBroadcast, s.broadcastApp)
	push.POST("/broadcasts/:id/cancel", s.cancelBroadcast, s.broadcastApp)
	push.POST("/broadcasts/:id/release", s.releaseBroadcast, s.broadcastApp)
	(&schedule.Routes{Domain: schedule.DomainOf(s.dom.Submitter), Decode: decodeStrict, View: func(b *model.Broadcast) any { return s.view(b) }}).Register(push, s.broadcastApp)
	push.POST("/broadcasts/:id/resend", s.resendBroadcast, s.broadcastApp, submits.middleware)
	push.GET("/broadcasts/:id/failures", s.listFailures, s.broadcastApp)
	push.GET("/broadcasts/:id/engagement", s.engagementSeries, s.broadcastApp)
	push.GET("/stats", s.stats)
	push.GET("/apps", s.listApps)
	push.GET("/audiences", s.listAudiences)
	// Reloading reads every app's audiences: a token of some apps only may not.
	push.POST("/audiences/reload", s.reloadAudiences, everyApp)
	// Previews count audiences as the console's operator types: one
	// budget per token for both routes (the counts are cached too).
	previews := newSubmitLimiter(s.cfg.Limits.PreviewsPerMinute, "previews")
	push.POST("/audiences/:name/preview", s.previewAudience, previews.middleware)
	s.jobRoutes().RegisterList(push)
	push.POST("/preview", s.previewBroadcastAudience, previews.middleware)
	push.GET("/broadcasts/:id/events", s.watchBroadcast, s.broadcastApp)
	s.clusterRoutes().Register(push)
	// The categories and the bundled consent table.
	routes := &consents.Routes{Domain: s.dom.Consents, Categories: s.dom.Categories, Decode: decodeStrict, Actor: callerName,
		RequestID: func(c echo.Context) string { return logging.RequestID(c.Request().Context()) },
		Now:       func() time.Time { return s.now() }}
	routes.Register(push)
	// The saved segments; their previews spend the previews' budget.
	(&segments.Routes{Domain: s.dom.Segments, Decode: decodeStrict, Actor: callerName,
		Now: func() time.Time { return s.now() }, Previews: previews.middleware}).Register(push)
	// The API keys: an admin's (neededRole) of every app.
	(&keys.Routes{Domain: s.dom.Keys, Decode: decodeStrict, Actor: callerActor, EveryApp: everyApp}).Register(push)
	s.dom.Templates.Register(push, decodeStrict, callerName)                                                      // viewers list, senders save (neededRole)
	(&deliveries.Routes{Domain: s.dom.Deliveries, EveryApp: everyApp, KnownCode: fcm.IsKnownCode}).Register(push) // every app's broadcasts
	// Served with no endpoint configured too: an empty list, so the
	// console can say so rather than meet a 404.
	// Webhook endpoints hear of every app's broadcasts: a token limited
	// to some apps gets 403 on them (everyApp).
	(&webhooks.Routes{Deliverer: s.extra.webhooks}).Register(push, everyApp)
	// The audit trail (admins: neededRole); entries are only appended.
	(&audittrail.Routes{Log: s.dom.AuditLog, Logger: s.log}).Register(push)
	(&campaigns.Routes{Domain: s.dom.Campaigns, Apps: s.appFilter, Now: func() time.Time { return s.now() }}).Register(push) // the caller's apps, as /stats
}

// jobRoutes are the cron jobs' routes (package jobs).
func (s *Server) jobRoutes() *jobs.Routes {
	// The domain's calls are closures: a Server built without a domain
	// (the route listing's) registers the routes all the same.
	return &jobs.Routes{Jobs: s.dom.Jobs,
		Fire: func(ctx context.Context, j *cron.Compiled, at time.Time) (*model.Broadcast, bool, error) {
			return s.dom.Submitter.FireJob(ctx, j, at)
		},
		LastFire: func(ctx context.Context, job string) (model.LastFire, error) {
			return s.dom.Reader.LastJobFire(ctx, job)
		},
		View: func(b *model.Broadcast) any { return s.view(b) }, AppFilter: s.appFilter, AppOf: s.dom.Apps.of,
		Decode: decodeStrict, Now: func() time.Time { return s.now() }, Control: jobs.ControlOf(s.dom.Submitter), Actor: callerName}
}

// Handler returns the http.Handler to serve.
func (s *Server) Handler() http.Handler { return s.echo }

// Stop ends the live-watch streams and their pollers (safe twice). Call it
// when the HTTP server shuts down: Shutdown waits for idle connections,
// which a stream never becomes by itself.
func (s *Server) Stop(ctx context.Context) error { return s.console.watch.Stop(ctx) }

// HTTPServer returns an http.Server with every timeout set: a slow or stuck
// client cannot hold a connection forever. Its Shutdown ends the watch
// streams (Stop).
func (s *Server) HTTPServer() *http.Server {
	srv := s.httpServer(s.cfg.Addr, s.echo)
	// Shutdown waits for the streams' handlers, which end once the hub
	// has stopped; Stop (with its deadline) waits for the pollers.
	srv.RegisterOnShutdown(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeouts.Shutdown)
		defer cancel()
		_ = s.console.watch.Stop(ctx)
	})
	return srv
}

// httpServer serves h on addr with the configured timeouts, so that no
// client can hold a connection forever.
func (s *Server) httpServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadTimeout:       s.cfg.Timeouts.Read,
		ReadHeaderTimeout: s.cfg.Timeouts.ReadHeader,
		WriteTimeout:      s.cfg.Timeouts.Write,
		IdleTimeout:       s.cfg.Timeouts.Idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestContext puts the request id into the request's context (so every
// log line, including those of the broadcast's workers, carries it) and
// writes one access-log line per request.
func (s *Server) requestContext(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Response().Header().Get(echo.HeaderXRequestID)
		if !validRequestID.MatchString(id) {
			id = newRequestID()
			c.Response().Header().Set(echo.HeaderXRequestID, id)
		}
		ctx := logging.WithRequestID(c.Request().Context(), id)
		c.SetRequest(c.Request().WithContext(ctx))
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		s.log.LogAttrs(ctx, slog.LevelInfo, "http request",
			slog.String("method", c.Request().Method),
			slog.String("path", c.Request().URL.Path),
			slog.Int("status", c.Response().Status),
			slog.Duration("latency", time.Since(start)))
		return nil
	}
}

// recoverPanics turns a handler panic into a logged 500, never a crash.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				err = fmt.Errorf("handler panic: %v", v)
			}
		}()
		return next(c)
	}
}
