// Package server is pushfan's HTTP API on Echo, and HTTP only: routes,
// auth, strict decoding, calls into package broadcast (whose request rules
// validate), rendering, and the one error handler that maps typed errors
// (a *rules.FieldError is a 400 naming the field) to the contract's
// JSON.
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

	"pushfan/audience"
	"pushfan/broadcast"
	"pushfan/broadcast/reads"
	"pushfan/broadcast/testsend"
	"pushfan/config"
	"pushfan/cron"
	"pushfan/engagement"
	"pushfan/internal/platform/logging"
	"pushfan/model"
	"pushfan/server/openapi"
	"pushfan/webhook"
)

// Pinger reports whether the database answers (readiness).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Server holds the API's dependencies.
type Server struct {
	cfg     config.Config
	svc     *broadcast.Service
	reads   *reads.Reader
	tests   *testsend.Tester
	db      Pinger
	log     *slog.Logger
	admin   tokenSet
	now     func() time.Time
	echo    *echo.Echo
	metrics http.Handler

	audiences    map[string]*audience.Audience
	audienceList []*audience.Audience
	jobs         []*cron.Compiled
	internal     tokenSet
	openAPIDoc   []byte // GET /openapi.json, copied once

	// The console: sessions (nil: no sign-in), the live-watch streams,
	// and the cluster view.
	sessions SessionStore
	watch    *watchHub
	cluster  func(ctx context.Context, app string) (model.Cluster, error)
	events   *engagement.Ingester // the public event routes (nil: none)
	webhooks *webhook.Deliverer   // the webhook endpoints' health (nil: none)

	// failures is the failed-authentication budget per client address
	// (bearer tokens and sign-ins); proxies are the trusted reverse
	// proxies; metricsTokens may read GET /metrics.
	failures      *authFailures
	proxies       trustedProxies
	metricsTokens tokenSet
}

// Option adjusts a Server.
type Option func(*Server)

// WithMetrics serves h (a Prometheus handler) at GET /metrics, to the
// metrics token and the admin tokens (and on PUSHFAN_METRICS_ADDR: see
// MetricsServer).
func WithMetrics(h http.Handler) Option { return func(s *Server) { s.metrics = h } }

// WithAudiences makes named audiences (checked against the database)
// available to requests.
func WithAudiences(as []*audience.Audience) Option {
	return func(s *Server) {
		for _, a := range as {
			s.audiences[a.Name()] = a
		}
		s.audienceList = as
	}
}

// WithJobs serves the recurring jobs (GET /push/cron, POST /internal/cron/{job}).
func WithJobs(jobs []*cron.Compiled) Option { return func(s *Server) { s.jobs = jobs } }

// Domain is the broadcast domain the API calls: the write side (submits,
// cancels, releases, resends, job fires), its reads and the test sends.
type Domain struct {
	Service *broadcast.Service
	Reads   *reads.Reader
	Tests   *testsend.Tester
}

// New wires the routes. cfg must have passed Validate.
func New(cfg config.Config, d Domain, db Pinger, log *slog.Logger, opts ...Option) *Server {
	tokens, err := config.ParseAdminTokens(cfg.AdminTokens)
	if err != nil {
		// Validate refuses such a config; never run with half the tokens.
		log.Error("admin tokens unusable; the admin API refuses every request", "err", err)
		tokens = nil
	}
	s := &Server{cfg: cfg, svc: d.Service, reads: d.Reads, tests: d.Tests, db: db, log: log, admin: tokenSet{tokens: tokens}, now: time.Now,
		audiences: map[string]*audience.Audience{}, openAPIDoc: openapi.Document()}
	if cfg.InternalToken != "" {
		s.internal = tokenSet{tokens: []config.AdminToken{{Name: "internal", Role: config.RoleSender, Hash: sha256.Sum256([]byte(cfg.InternalToken))}}}
	}
	for _, o := range opts {
		o(s)
	}
	// Burst: a minute's worth, so a mistyped paste or two costs nothing.
	s.failures = newAuthFailures(cfg.HTTP.SignInFailuresPerMinute)
	s.proxies = parseProxies(cfg.HTTP.TrustedProxies)
	s.metricsTokens = metricsTokens(cfg.MetricsToken, tokens)
	s.watch = newWatchHub(d.Reads.Peek, s.view, log)
	s.watch.history = d.Reads.SendRate
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.IPExtractor = s.proxies.clientAddr()
	e.HTTPErrorHandler = s.errorHandler
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator:        newRequestID,
		RequestIDHandler: func(c echo.Context, id string) {},
	}))
	e.Use(s.requestContext)
	e.Use(s.recoverPanics)
	e.Use(middleware.BodyLimit(fmt.Sprintf("%dB", cfg.HTTP.BodyLimit)))

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.json", s.openAPI)
	if s.metrics != nil {
		e.GET("/metrics", echo.WrapHandler(s.metrics), s.requireBearer(s.metricsTokens, "metrics"))
	}

	s.routeConsole(e)
	s.routeEvents(e)

	push := e.Group("/push", s.requireAdmin)
	// A resend creates a broadcast too: one submit budget per token for both.
	submits := newSubmitLimiter(cfg.HTTP.SubmitPerMinute, "broadcasts")
	push.POST("/broadcast", s.createBroadcast, submits.middleware)
	// One test-send budget per token, for messages and stored broadcasts.
	tests := newSubmitLimiter(cfg.HTTP.TestSendsPerMinute, "test sends")
	push.POST("/test", s.testSend, tests.middleware)
	// A token limited to some apps reaches their broadcasts only
	// (broadcastApp), and sees their lists and counts only (appFilter).
	push.POST("/broadcasts/:id/test", s.testSendBroadcast, s.broadcastApp, tests.middleware)
	push.GET("/broadcasts", s.listBroadcasts)
	push.GET("/broadcasts/:id", s.getBroadcast, s.broadcastApp)
	push.POST("/broadcasts/:id/cancel", s.cancelBroadcast, s.broadcastApp)
	push.POST("/broadcasts/:id/release", s.releaseBroadcast, s.broadcastApp)
	push.POST("/broadcasts/:id/resend", s.resendBroadcast, s.broadcastApp, submits.middleware)
	push.GET("/broadcasts/:id/failures", s.listFailures, s.broadcastApp)
	push.GET("/broadcasts/:id/engagement", s.engagementSeries, s.broadcastApp)
	push.GET("/stats", s.stats)
	push.GET("/apps", s.listApps)
	push.GET("/audiences", s.listAudiences)
	// Previews count audiences as the console's operator types: one
	// budget per token for both routes (the counts are cached too).
	previews := newSubmitLimiter(cfg.HTTP.PreviewsPerMinute, "previews")
	push.POST("/audiences/:name/preview", s.previewAudience, previews.middleware)
	push.GET("/cron", s.listJobs)
	push.POST("/preview", s.previewBroadcastAudience, previews.middleware)
	push.GET("/broadcasts/:id/events", s.watchBroadcast, s.broadcastApp)
	push.GET("/cluster", s.getCluster)
	// Served with no endpoint configured too: an empty list, so the
	// console can say so rather than meet a 404.
	// Webhook endpoints hear of every app's broadcasts: a token limited
	// to some apps gets 403 on them (everyApp).
	push.GET("/webhooks", s.listWebhooks, everyApp)
	push.GET("/webhooks/:name/deliveries", s.listDeliveries, everyApp)
	push.POST("/webhooks/:name/deliveries/:id/redeliver", s.redeliver, everyApp)
	push.POST("/webhooks/:name/enable", s.enableWebhook, everyApp)

	internal := e.Group("/internal", s.requireBearer(s.internal, "internal"))
	internal.POST("/cron/:job", s.triggerJob)
	s.echo = e
	return s
}

// Handler returns the http.Handler to serve.
func (s *Server) Handler() http.Handler { return s.echo }

// Stop ends the live-watch streams and their pollers (safe twice). Call it
// when the HTTP server shuts down: Shutdown waits for idle connections,
// which a stream never becomes by itself.
func (s *Server) Stop(ctx context.Context) error { return s.watch.stop(ctx) }

// HTTPServer returns an http.Server with every timeout set: a slow or stuck
// client cannot hold a connection forever. Its Shutdown ends the watch
// streams (Stop).
func (s *Server) HTTPServer() *http.Server {
	srv := s.httpServer(s.cfg.HTTPAddr, s.echo)
	// Shutdown waits for the streams' handlers, which end once the hub
	// has stopped; Stop (with its deadline) waits for the pollers.
	srv.RegisterOnShutdown(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.HTTP.ShutdownTimeout)
		defer cancel()
		_ = s.watch.stop(ctx)
	})
	return srv
}

// httpServer serves h on addr with the configured timeouts, so that no
// client can hold a connection forever.
func (s *Server) httpServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadTimeout:       s.cfg.HTTP.ReadTimeout,
		ReadHeaderTimeout: s.cfg.HTTP.ReadHeaderTimeout,
		WriteTimeout:      s.cfg.HTTP.WriteTimeout,
		IdleTimeout:       s.cfg.HTTP.IdleTimeout,
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
