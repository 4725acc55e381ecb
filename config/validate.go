package config

import (
	"errors"
	"fmt"
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
	}
	if parts&PartServe != 0 {
		errs = append(errs, c.validateServe()...)
	}
	// The bounds of the variables table (variables.go), of every part asked.
	errs = append(errs, c.checkRules(parts)...)
	return errors.Join(errs...)
}

// validateServe checks what only serve uses, beyond the table's rules: the
// formats, and the bounds that involve two settings.
func (c *Config) validateServe() []error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		bad("PUSHFAN_HTTP_ADDR", "%q is not host:port: %v", c.HTTPAddr, err)
	}
	c.Events.validate(c.Engine.Retention, bad)
	if d := c.Engine.OutcomeRetention; d != 0 && d < time.Hour {
		bad("PUSHFAN_OUTCOME_RETENTION", "must be 0 (keep none) or at least 1h (a running broadcast's outcomes must outlive it), got %v", d)
	}
	c.validateApps(bad)
	switch {
	case len(c.Apps) > 0:
		// Each app was checked with its own project and credentials.
	case c.FCMEndpoint != "":
		u, err := url.Parse(c.FCMEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("PUSHFAN_FCM_ENDPOINT", "%q is not an http(s) URL like http://127.0.0.1:9099/v1", c.FCMEndpoint)
		}
		if c.FCMProjectID == "" {
			bad("PUSHFAN_FCM_PROJECT_ID", "must be set when PUSHFAN_FCM_ENDPOINT points at an emulator")
		}
	default:
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
	if tokens, err := ParseAdminTokens(c.AdminTokens); err != nil {
		bad("PUSHFAN_ADMIN_TOKENS", "%v", err)
	} else {
		known := map[string]bool{}
		for _, n := range c.AppNames() {
			known[n] = true
		}
		for _, t := range tokens {
			for _, a := range t.Apps {
				if !known[a] {
					bad("PUSHFAN_ADMIN_TOKENS", "token %s names app %q, which is not configured", t.Name, a)
				}
			}
		}
	}
	for _, cidr := range c.HTTP.TrustedProxies {
		if _, _, err := net.ParseCIDR(cidr); err != nil {
			bad("PUSHFAN_TRUSTED_PROXIES", "%q is not a CIDR such as 10.0.0.0/8 or 192.168.1.10/32", cidr)
		}
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
	if c.InternalToken != "" && len(c.InternalToken) < 16 {
		bad("PUSHFAN_INTERNAL_TOKEN", "is shorter than 16 characters")
	}

	e := c.Engine
	if e.ChunkParallel > e.Concurrency {
		bad("PUSHFAN_CHUNK_PARALLEL", "(%d) must not exceed PUSHFAN_CONCURRENCY (%d): each running chunk needs a worker", e.ChunkParallel, e.Concurrency)
	}
	if e.Lease > 0 && e.FlushInterval > 0 && e.Lease < 3*e.FlushInterval {
		bad("PUSHFAN_LEASE", "(%v) must be at least 3x PUSHFAN_FLUSH_INTERVAL (%v): checkpoints renew the lease", e.Lease, e.FlushInterval)
	}
	if c.FCMH2C && !strings.HasPrefix(c.FCMEndpoint, "http://") {
		bad("PUSHFAN_FCM_H2C", "needs an http:// PUSHFAN_FCM_ENDPOINT (an emulator); real FCM negotiates HTTP/2 over TLS by itself")
	}
	if e.TransactionalUsers < 0 || e.TransactionalUsers > e.MaxUserIDs {
		bad("PUSHFAN_TRANSACTIONAL_USERS", "must be between 0 and PUSHFAN_MAX_USER_IDS (%d), got %d", e.MaxUserIDs, e.TransactionalUsers)
	}
	errs = append(errs, validateLocalTime(e)...)
	errs = append(errs, validateFrequencyCaps(c)...)
	errs = append(errs, validateCategories(c)...)
	errs = append(errs, c.validateAudiences()...)
	if _, err := ParseRetrySchedule(c.WebhookRetrySchedule); err != nil {
		errs = append(errs, fmt.Errorf("PUSHFAN_WEBHOOK_RETRY_SCHEDULE: %w", err))
	}
	if c.HTTP.BodyLimit < 1024 {
		bad("PUSHFAN_HTTP_BODY_LIMIT", "must be at least 1024 bytes, got %d", c.HTTP.BodyLimit)
	}
	// The server must be able to write a synchronous answer after waiting.
	if c.HTTP.WriteTimeout > 0 && c.HTTP.WaitTimeout >= c.HTTP.WriteTimeout {
		bad("PUSHFAN_WAIT_TIMEOUT", "(%v) must be shorter than PUSHFAN_HTTP_WRITE_TIMEOUT (%v)", c.HTTP.WaitTimeout, c.HTTP.WriteTimeout)
	}
	c.validateOIDC(bad)
	// Named audiences and jobs are the domain's to compile (app.CheckDefinitions).
	return errs
}
