package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Getenv looks a variable up; os.LookupEnv in production, a map in tests.
type Getenv func(key string) (string, bool)

// Load builds the configuration: defaults, then the YAML file named by
// PUSHFAN_CONFIG (if any), then the environment, and validates all of it.
// It returns every problem found, joined, each naming the variable at
// fault.
func Load(getenv Getenv) (Config, error) { return LoadParts(getenv, PartsAll) }

// LoadParts is Load validating only the given parts (a value that does not
// parse is an error whatever the parts).
func LoadParts(getenv Getenv, parts Part) (Config, error) {
	cfg := Defaults()
	if path, ok := getenv("PUSHFAN_CONFIG"); ok && path != "" {
		if err := loadYAML(path, &cfg); err != nil {
			return cfg, fmt.Errorf("PUSHFAN_CONFIG: %w", err)
		}
	}
	var errs []error
	for _, v := range variables(&cfg) {
		raw, ok := getenv(v.name)
		if !ok || raw == "" {
			continue
		}
		if err := v.set(strings.TrimSpace(raw)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", v.name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, err
	}
	return cfg, cfg.ValidateParts(parts)
}

// FromOS loads the configuration from the process environment, validating
// the given parts.
func FromOS(parts Part) (Config, error) { return LoadParts(os.LookupEnv, parts) }

func loadYAML(path string, cfg *Config) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening config file: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true) // a typo in a key is an error, not a silently ignored setting
	if err := dec.Decode(cfg); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	return nil
}

// variable binds one environment variable to a field.
type variable struct {
	name string
	set  func(string) error
}

// Variables lists every environment variable pushfan reads, in the order the
// README documents them.
func Variables() []string {
	var cfg Config
	vs := variables(&cfg)
	names := make([]string, 0, len(vs)+1)
	names = append(names, "PUSHFAN_CONFIG")
	for _, v := range vs {
		names = append(names, v.name)
	}
	return names
}

func variables(c *Config) []variable {
	return []variable{
		{"PUSHFAN_MYSQL_DSN", str(&c.MySQLDSN)},
		{"PUSHFAN_HTTP_ADDR", str(&c.HTTPAddr)},
		{"PUSHFAN_FCM_ENDPOINT", str(&c.FCMEndpoint)},
		{"PUSHFAN_FCM_PROJECT_ID", str(&c.FCMProjectID)},
		{"PUSHFAN_FCM_CA_FILE", str(&c.FCMCAFile)},
		{"PUSHFAN_FCM_H2C", boolean(&c.FCMH2C)},
		{"PUSHFAN_FCM_CLIENT", str(&c.FCMClient)},
		{"PUSHFAN_FCM_HTTP2", str(&c.FCMHTTP2)},
		{"GOOGLE_APPLICATION_CREDENTIALS", str(&c.CredentialsFile)},
		{"PUSHFAN_ADMIN_TOKENS", list(&c.AdminTokens)},
		{"PUSHFAN_INTERNAL_TOKEN", str(&c.InternalToken)},
		{"PUSHFAN_METRICS_ADDR", str(&c.MetricsAddr)},
		{"PUSHFAN_METRICS_TOKEN", str(&c.MetricsToken)},
		{"PUSHFAN_CONCURRENCY", integer(&c.Engine.Concurrency)},
		{"PUSHFAN_PAGE_SIZE", integer(&c.Engine.PageSize)},
		{"PUSHFAN_SEND_TIMEOUT", duration(&c.Engine.SendTimeout)},
		{"PUSHFAN_MAX_ATTEMPTS", integer(&c.Engine.MaxAttempts)},
		{"PUSHFAN_RETRY_BASE_DELAY", duration(&c.Engine.RetryBaseDelay)},
		{"PUSHFAN_RETRY_MAX_DELAY", duration(&c.Engine.RetryMaxDelay)},
		{"PUSHFAN_RATE_LIMIT", float(&c.Engine.RateLimit)},
		{"PUSHFAN_RATE_WINDOW", duration(&c.Engine.RateWindow)},
		{"PUSHFAN_RAMP_UP", duration(&c.Engine.RampUp)},
		{"PUSHFAN_FLUSH_INTERVAL", duration(&c.Engine.FlushInterval)},
		{"PUSHFAN_LEASE", duration(&c.Engine.Lease)},
		{"PUSHFAN_CHUNK_WIDTH", integer(&c.Engine.ChunkWidth)},
		{"PUSHFAN_MAX_CHUNKS", integer(&c.Engine.MaxChunks)},
		{"PUSHFAN_CHUNK_PARALLEL", integer(&c.Engine.ChunkParallel)},
		{"PUSHFAN_PLAN_PARALLEL", integer(&c.Engine.PlanParallel)},
		{"PUSHFAN_PLAN_RETRY", duration(&c.Engine.PlanRetry)},
		{"PUSHFAN_POLL_INTERVAL", duration(&c.Engine.PollInterval)},
		{"PUSHFAN_INSTANCE_ID", str(&c.Engine.InstanceID)},
		{"PUSHFAN_MAX_USER_IDS", integer(&c.Engine.MaxUserIDs)},
		{"PUSHFAN_TRANSACTIONAL_USERS", integer(&c.Engine.TransactionalUsers)},
		{"PUSHFAN_HANDBACK_TIMEOUT", duration(&c.Engine.HandBackTimeout)},
		{"PUSHFAN_RETENTION", duration(&c.Engine.Retention)},
		{"PUSHFAN_HOLD_EXPIRY", duration(&c.Engine.HoldExpiry)},
		{"PUSHFAN_RELEASE_FOUR_EYES", boolean(&c.Engine.ReleaseFourEyes)},
		{"PUSHFAN_START_SPREAD", duration(&c.Engine.StartSpread)},
		{"PUSHFAN_DEFAULT_TIMEZONE", str(&c.Engine.DefaultTimezone)},
		{"PUSHFAN_QUIET_HOURS", str(&c.Engine.QuietHours)},
		{"PUSHFAN_FREQUENCY_CAP", str(&c.Engine.FrequencyCap)},
		{"PUSHFAN_HTTP_READ_TIMEOUT", duration(&c.HTTP.ReadTimeout)},
		{"PUSHFAN_HTTP_READ_HEADER_TIMEOUT", duration(&c.HTTP.ReadHeaderTimeout)},
		{"PUSHFAN_HTTP_WRITE_TIMEOUT", duration(&c.HTTP.WriteTimeout)},
		{"PUSHFAN_HTTP_IDLE_TIMEOUT", duration(&c.HTTP.IdleTimeout)},
		{"PUSHFAN_HTTP_BODY_LIMIT", int64v(&c.HTTP.BodyLimit)},
		{"PUSHFAN_WAIT_TIMEOUT", duration(&c.HTTP.WaitTimeout)},
		{"PUSHFAN_SHUTDOWN_TIMEOUT", duration(&c.HTTP.ShutdownTimeout)},
		{"PUSHFAN_SUBMIT_PER_MINUTE", float(&c.HTTP.SubmitPerMinute)},
		{"PUSHFAN_TEST_SENDS_PER_MINUTE", float(&c.HTTP.TestSendsPerMinute)},
		{"PUSHFAN_SESSION_TTL", duration(&c.HTTP.SessionTTL)},
		{"PUSHFAN_SIGNIN_FAILURES_PER_MINUTE", float(&c.HTTP.SignInFailuresPerMinute)},
		{"PUSHFAN_TRUSTED_PROXIES", list(&c.HTTP.TrustedProxies)},
		{"PUSHFAN_PREVIEWS_PER_MINUTE", float(&c.HTTP.PreviewsPerMinute)},
		{"PUSHFAN_PREVIEW_CACHE", duration(&c.HTTP.PreviewCache)},
		{"PUSHFAN_SCHEDULE_HORIZON", duration(&c.HTTP.ScheduleHorizon)},
		{"PUSHFAN_STATS_CACHE", duration(&c.HTTP.StatsCache)},
		{"PUSHFAN_BROADCAST_CACHE", duration(&c.HTTP.BroadcastCache)},
		{"PUSHFAN_TRACKING", str(&c.Events.Tracking)},
		{"PUSHFAN_EVENT_KEYS", list(&c.Events.Keys)},
		{"PUSHFAN_EVENT_TTL", duration(&c.Events.TTL)},
		{"PUSHFAN_EVENT_ORIGINS", list(&c.Events.Origins)},
		{"PUSHFAN_EVENT_RATE_PER_ADDRESS", float(&c.Events.PerAddress)},
		{"PUSHFAN_PUBLIC_URL", str(&c.Events.PublicURL)},
		{"PUSHFAN_WEBHOOK_ALLOW_PRIVATE", boolean(&c.WebhookAllowPrivate)},
		{"PUSHFAN_WEBHOOK_TIMEOUT", duration(&c.WebhookTimeout)},
		{"PUSHFAN_DB_MAX_OPEN", integer(&c.DB.MaxOpen)},
		{"PUSHFAN_DB_TIMEOUT", duration(&c.DB.Timeout)},
		{"PUSHFAN_LOG_LEVEL", str(&c.Log.Level)},
		{"PUSHFAN_LOG_FORMAT", str(&c.Log.Format)},
	}
}

func str(p *string) func(string) error {
	return func(s string) error { *p = s; return nil }
}

func list(p *[]string) func(string) error {
	return func(s string) error {
		var out []string
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
		*p = out
		return nil
	}
}

func integer(p *int) func(string) error {
	return func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		*p = n
		return nil
	}
}

func int64v(p *int64) func(string) error {
	return func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer number of bytes", s)
		}
		*p = n
		return nil
	}
}

func float(p *float64) func(string) error {
	return func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		*p = f
		return nil
	}
}

func boolean(p *bool) func(string) error {
	return func(s string) error {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not a boolean (use true or false)", s)
		}
		*p = b
		return nil
	}
}

func duration(p *time.Duration) func(string) error {
	return func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (use e.g. 500ms, 10s, 2m)", s)
		}
		*p = d
		return nil
	}
}
