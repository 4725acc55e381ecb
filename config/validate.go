package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Part is a group of settings one subcommand uses.
type Part uint8

const (
	// PartDatabase: the DSN and the pool (migrate and seed use only this
	// and the log).
	PartDatabase Part = 1 << iota
	// PartLog: the log level and format.
	PartLog
	// PartServe: everything else serve needs (FCM, HTTP, the engine, the
	// audiences and jobs of the YAML file).
	PartServe

	// PartsAll is what serve (and config check) validates.
	PartsAll = PartDatabase | PartLog | PartServe
)

// MaxStartSpread bounds PUSHFAN_START_SPREAD: the spread is meant to take
// a broadcast off the top of the minute, not to move it by much.
const MaxStartSpread = 10 * time.Minute

// Validate checks every setting and returns all problems at once, each
// naming the environment variable that sets it.
func (c *Config) Validate() error { return c.ValidateParts(PartsAll) }

// ValidateParts checks the settings of the given parts only: `pushfan
// migrate` needs a database, not FCM credentials.
func (c *Config) ValidateParts(parts Part) error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	if parts&PartDatabase != 0 {
		if dsn, err := mysql.ParseDSN(c.MySQLDSN); err != nil {
			bad("PUSHFAN_MYSQL_DSN", "does not parse as a go-sql-driver DSN: %v", err)
		} else if dsn.DBName == "" {
			bad("PUSHFAN_MYSQL_DSN", "names no database (expected .../pushfan?parseTime=true)")
		}
		if c.DB.MaxOpen <= 0 || c.DB.MaxOpen > 1000 {
			bad("PUSHFAN_DB_MAX_OPEN", "must be between 1 and %d, got %d", 1000, c.DB.MaxOpen)
		}
		if c.DB.Timeout <= 0 {
			bad("PUSHFAN_DB_TIMEOUT", "must be a positive duration, got %v", c.DB.Timeout)
		}
	}
	if parts&PartLog != 0 {
		switch strings.ToLower(c.Log.Level) {
		case "debug", "info", "warn", "error":
		default:
			bad("PUSHFAN_LOG_LEVEL", "must be debug, info, warn or error, got %q", c.Log.Level)
		}
		switch c.Log.Format {
		case "json", "text":
		default:
			bad("PUSHFAN_LOG_FORMAT", "must be json or text, got %q", c.Log.Format)
		}
	}
	if parts&PartServe != 0 {
		errs = append(errs, c.validateServe()...)
	}
	return errors.Join(errs...)
}

// validateServe checks what only serve uses.
func (c *Config) validateServe() []error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		bad("PUSHFAN_HTTP_ADDR", "%q is not host:port: %v", c.HTTPAddr, err)
	}
	c.Events.validate(c.Engine.Retention, bad)
	if c.WebhookTimeout < time.Second || c.WebhookTimeout > time.Minute {
		bad("PUSHFAN_WEBHOOK_TIMEOUT", "must be between 1s and 1m, got %v", c.WebhookTimeout)
	}
	if c.FCMEndpoint != "" {
		u, err := url.Parse(c.FCMEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("PUSHFAN_FCM_ENDPOINT", "%q is not an http(s) URL like http://127.0.0.1:9099/v1", c.FCMEndpoint)
		}
		if c.FCMProjectID == "" {
			bad("PUSHFAN_FCM_PROJECT_ID", "must be set when PUSHFAN_FCM_ENDPOINT points at an emulator")
		}
	} else {
		// Real FCM: the service account file is the only way to authenticate.
		if c.CredentialsFile == "" {
			bad("GOOGLE_APPLICATION_CREDENTIALS", "must name a service-account JSON file when PUSHFAN_FCM_ENDPOINT is unset (real FCM); set PUSHFAN_FCM_ENDPOINT to use an emulator")
		} else if _, err := os.Stat(c.CredentialsFile); err != nil {
			bad("GOOGLE_APPLICATION_CREDENTIALS", "cannot read %q: %v", c.CredentialsFile, err)
		}
	}
	if c.FCMCAFile != "" {
		if _, err := os.Stat(c.FCMCAFile); err != nil {
			bad("PUSHFAN_FCM_CA_FILE", "cannot read %q: %v", c.FCMCAFile, err)
		}
	}
	if _, err := ParseAdminTokens(c.AdminTokens); err != nil {
		bad("PUSHFAN_ADMIN_TOKENS", "%v", err)
	}
	if c.HTTP.BroadcastCache < 0 {
		bad("PUSHFAN_BROADCAST_CACHE", "must not be negative, got %v", c.HTTP.BroadcastCache)
	}
	if c.HTTP.StatsCache < 0 {
		bad("PUSHFAN_STATS_CACHE", "must not be negative, got %v", c.HTTP.StatsCache)
	}
	if c.HTTP.SubmitPerMinute <= 0 {
		bad("PUSHFAN_SUBMIT_PER_MINUTE", "must be a positive number of broadcasts per minute per token, got %v", c.HTTP.SubmitPerMinute)
	}
	if c.HTTP.SessionTTL < time.Minute || c.HTTP.SessionTTL > 30*24*time.Hour {
		bad("PUSHFAN_SESSION_TTL", "must be from 1m to 720h (how long a console sign-in lasts), got %v", c.HTTP.SessionTTL)
	}
	for _, cidr := range c.HTTP.TrustedProxies {
		if _, _, err := net.ParseCIDR(cidr); err != nil {
			bad("PUSHFAN_TRUSTED_PROXIES", "%q is not a CIDR such as 10.0.0.0/8 or 192.168.1.10/32", cidr)
		}
	}
	if c.HTTP.SignInFailuresPerMinute <= 0 {
		bad("PUSHFAN_SIGNIN_FAILURES_PER_MINUTE", "must be a positive number of failed authentications (wrong bearer tokens and sign-ins) per minute per client address, got %v", c.HTTP.SignInFailuresPerMinute)
	}
	if c.HTTP.PreviewsPerMinute <= 0 {
		bad("PUSHFAN_PREVIEWS_PER_MINUTE", "must be a positive number of audience previews per minute per token, got %v", c.HTTP.PreviewsPerMinute)
	}
	if c.HTTP.PreviewCache < 0 || c.HTTP.PreviewCache > 10*time.Minute {
		bad("PUSHFAN_PREVIEW_CACHE", "must be from 0 (no cache) to 10m, got %v", c.HTTP.PreviewCache)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			bad("PUSHFAN_METRICS_ADDR", "%q is not host:port such as 127.0.0.1:9090: %v", c.MetricsAddr, err)
		} else if c.MetricsAddr == c.HTTPAddr {
			bad("PUSHFAN_METRICS_ADDR", "%q is PUSHFAN_HTTP_ADDR too; the metrics listener needs an address of its own", c.MetricsAddr)
		}
	}
	if c.MetricsToken != "" && len(c.MetricsToken) < 16 {
		bad("PUSHFAN_METRICS_TOKEN", "is shorter than 16 characters")
	}
	if c.HTTP.TestSendsPerMinute <= 0 {
		bad("PUSHFAN_TEST_SENDS_PER_MINUTE", "must be a positive number of test sends per minute per token, got %v", c.HTTP.TestSendsPerMinute)
	}
	if c.InternalToken != "" && len(c.InternalToken) < 16 {
		bad("PUSHFAN_INTERNAL_TOKEN", "is shorter than 16 characters")
	}

	e := c.Engine
	positive := func(name string, v int, max int) {
		if v <= 0 || v > max {
			bad(name, "must be between 1 and %d, got %d", max, v)
		}
	}
	positive("PUSHFAN_CONCURRENCY", e.Concurrency, 20000)
	positive("PUSHFAN_PAGE_SIZE", e.PageSize, 100000)
	positive("PUSHFAN_MAX_ATTEMPTS", e.MaxAttempts, 100)
	positive("PUSHFAN_CHUNK_WIDTH", e.ChunkWidth, 100000000)
	positive("PUSHFAN_MAX_CHUNKS", e.MaxChunks, 100000)
	positive("PUSHFAN_CHUNK_PARALLEL", e.ChunkParallel, 64)
	if e.PlanRetry <= 0 || e.PlanRetry > time.Minute {
		bad("PUSHFAN_PLAN_RETRY", "must be a duration from 1ms to 1m, got %v", e.PlanRetry)
	}
	if e.PlanParallel < 0 || e.PlanParallel > 64 {
		bad("PUSHFAN_PLAN_PARALLEL", "must be between 0 (this instance plans no broadcast) and 64, got %d", e.PlanParallel)
	}
	if e.ChunkParallel > e.Concurrency {
		bad("PUSHFAN_CHUNK_PARALLEL", "(%d) must not exceed PUSHFAN_CONCURRENCY (%d): each running chunk needs a worker", e.ChunkParallel, e.Concurrency)
	}
	if len(e.InstanceID) > 64 {
		bad("PUSHFAN_INSTANCE_ID", "must be at most 64 characters")
	}
	if e.Lease > 0 && e.FlushInterval > 0 && e.Lease < 3*e.FlushInterval {
		bad("PUSHFAN_LEASE", "(%v) must be at least 3x PUSHFAN_FLUSH_INTERVAL (%v): checkpoints renew the lease", e.Lease, e.FlushInterval)
	}
	if c.FCMClient != "direct" && c.FCMClient != "sdk" {
		bad("PUSHFAN_FCM_CLIENT", "must be direct or sdk, got %q", c.FCMClient)
	}
	if c.FCMHTTP2 != "pushfan" && c.FCMHTTP2 != "net/http" {
		bad("PUSHFAN_FCM_HTTP2", "must be pushfan or net/http, got %q", c.FCMHTTP2)
	}
	if c.FCMH2C && !strings.HasPrefix(c.FCMEndpoint, "http://") {
		bad("PUSHFAN_FCM_H2C", "needs an http:// PUSHFAN_FCM_ENDPOINT (an emulator); real FCM negotiates HTTP/2 over TLS by itself")
	}
	positive("PUSHFAN_MAX_USER_IDS", e.MaxUserIDs, 1000000)
	if e.TransactionalUsers < 0 || e.TransactionalUsers > e.MaxUserIDs {
		bad("PUSHFAN_TRANSACTIONAL_USERS", "must be between 0 and PUSHFAN_MAX_USER_IDS (%d), got %d", e.MaxUserIDs, e.TransactionalUsers)
	}
	if e.RateLimit <= 0 || math.IsInf(e.RateLimit, 0) || math.IsNaN(e.RateLimit) {
		bad("PUSHFAN_RATE_LIMIT", "must be a positive number of messages per second, got %v", e.RateLimit)
	}
	durations := []struct {
		name string
		v    time.Duration
	}{
		{"PUSHFAN_SEND_TIMEOUT", e.SendTimeout},
		{"PUSHFAN_RETRY_BASE_DELAY", e.RetryBaseDelay},
		{"PUSHFAN_RETRY_MAX_DELAY", e.RetryMaxDelay},
		{"PUSHFAN_RAMP_UP", e.RampUp},
		{"PUSHFAN_RATE_WINDOW", e.RateWindow},
		{"PUSHFAN_FLUSH_INTERVAL", e.FlushInterval},
		{"PUSHFAN_LEASE", e.Lease},
		{"PUSHFAN_POLL_INTERVAL", e.PollInterval},
		{"PUSHFAN_HTTP_READ_TIMEOUT", c.HTTP.ReadTimeout},
		{"PUSHFAN_HTTP_READ_HEADER_TIMEOUT", c.HTTP.ReadHeaderTimeout},
		{"PUSHFAN_HTTP_WRITE_TIMEOUT", c.HTTP.WriteTimeout},
		{"PUSHFAN_HTTP_IDLE_TIMEOUT", c.HTTP.IdleTimeout},
		{"PUSHFAN_WAIT_TIMEOUT", c.HTTP.WaitTimeout},
		{"PUSHFAN_SHUTDOWN_TIMEOUT", c.HTTP.ShutdownTimeout},
		{"PUSHFAN_SCHEDULE_HORIZON", c.HTTP.ScheduleHorizon},
		{"PUSHFAN_HANDBACK_TIMEOUT", e.HandBackTimeout},
		{"PUSHFAN_HOLD_EXPIRY", e.HoldExpiry},
	}
	for _, d := range durations {
		if d.v <= 0 {
			bad(d.name, "must be a positive duration, got %v", d.v)
		}
	}
	// A spread is a few seconds; an hour would be a different schedule.
	if e.StartSpread < 0 || e.StartSpread > MaxStartSpread {
		bad("PUSHFAN_START_SPREAD", "must be between 0 (start on time) and %v, got %v", MaxStartSpread, e.StartSpread)
	}
	errs = append(errs, validateLocalTime(e)...)
	errs = append(errs, validateFrequencyCaps(c)...)
	// Idempotency keys live with their broadcast, promised for 24 h.
	if e.Retention < 24*time.Hour {
		bad("PUSHFAN_RETENTION", "must be at least 24h (idempotency keys are kept with their broadcast for a day), got %v", e.Retention)
	}
	if c.HTTP.BodyLimit < 1024 {
		bad("PUSHFAN_HTTP_BODY_LIMIT", "must be at least 1024 bytes, got %d", c.HTTP.BodyLimit)
	}
	// The server must be able to write a synchronous answer after waiting.
	if c.HTTP.WriteTimeout > 0 && c.HTTP.WaitTimeout >= c.HTTP.WriteTimeout {
		bad("PUSHFAN_WAIT_TIMEOUT", "(%v) must be shorter than PUSHFAN_HTTP_WRITE_TIMEOUT (%v)", c.HTTP.WaitTimeout, c.HTTP.WriteTimeout)
	}
	// Named audiences and jobs are the domain's to compile (app.CheckDefinitions).
	return errs
}
