// Package config holds pushfan's single Config struct: loaded from the
// environment (plus an optional YAML file named by PUSHFAN_CONFIG) and
// validated at start-up with errors that name the variable at fault.
package config

import (
	"time"

	"pushfan/model"
)

// Config is every setting pushfan reads. The environment wins over the YAML
// file where both set a value.
type Config struct {
	// File is the YAML file PUSHFAN_CONFIG named ("": none), which a
	// reload of the named audiences reads again (ReloadAudiences).
	File string `yaml:"-"`

	// The contract variables (docs/configuration.md).
	MySQLDSN        string   `yaml:"mysql_dsn"`
	HTTPAddr        string   `yaml:"http_addr"`
	FCMEndpoint     string   `yaml:"fcm_endpoint"`
	FCMProjectID    string   `yaml:"fcm_project_id"`
	CredentialsFile string   `yaml:"-"` // GOOGLE_APPLICATION_CREDENTIALS only: never in a file
	AdminTokens     []string `yaml:"-"` // secrets come from the environment only
	InternalToken   string   `yaml:"-"`

	// MetricsAddr, when set, is a listener of its own serving GET /metrics
	// only (for a scraper on a private network). MetricsToken is a bearer
	// token that may read /metrics (and nothing else); the admin tokens
	// may too. Without either, no one can read the metrics: they are not public.
	MetricsAddr  string `yaml:"metrics_addr"`
	MetricsToken string `yaml:"-"`

	// FCMH2C speaks HTTP/2 without TLS to an http:// emulator endpoint.
	FCMH2C bool `yaml:"fcm_h2c"`
	// FCMCAFile is a PEM bundle to trust for the FCM endpoint (an emulator
	// serving TLS with a self-signed certificate).
	FCMCAFile string `yaml:"fcm_ca_file"`
	// FCMClient is how requests are made: "direct" (a body encoded once per
	// message, the default) or "sdk" (messaging.Client.Send per token).
	FCMClient string `yaml:"fcm_client"`
	// FCMHTTP2 is the direct client's HTTP/2 client: "pushfan" (its own,
	// the default: fcm/transport) or "net/http" (Go's, which the SDK uses).
	FCMHTTP2 string `yaml:"fcm_http2"`

	// Apps are the Firebase projects pushfan sends for (apps.go); empty:
	// the FCM settings above make one app, "default".
	Apps []App `yaml:"apps"`
	// Audiences are named SQL audiences over the deployment's own tables.
	Audiences []Audience `yaml:"audiences"`
	// Jobs are recurring broadcasts.
	Jobs []Job `yaml:"jobs"`
	// Webhooks are the endpoints told what happened (package webhook),
	// compiled and checked by the domain.
	Webhooks []Webhook `yaml:"webhooks"`
	// Schema maps the built-in audiences onto the deployment's own users
	// and tokens tables; empty means the bundled tables.
	Schema model.SchemaMapping `yaml:"schema"`
	// FrequencyCaps are named caps (name → "1/2h,3/day") that an audience
	// or a job may name as its frequency_cap instead of the default.
	FrequencyCaps map[string]string `yaml:"frequency_caps"`
	// Categories are the message categories with their consent rules
	// (categories.go, docs/consent.md); DefaultCategory is the category of
	// a broadcast that names none ("": such a broadcast is refused when
	// categories are configured).
	Categories      []Category `yaml:"categories"`
	DefaultCategory string     `yaml:"default_category"`
	// Delivery is how each class's messages are sent: priority on Android
	// and APNs, and how long an offline device's copy is kept (delivery.go;
	// an app's own replaces it field by field).
	Delivery model.DeliveryDefaults `yaml:"delivery"`

	Engine Engine `yaml:"engine"`
	HTTP   HTTP   `yaml:"http"`
	Events Events `yaml:"events"`
	// WebhookAllowPrivate lets webhooks reach private, loopback and
	// link-local addresses (a receiver on the same network); off, such an
	// address is refused when connecting. WebhookTimeout bounds an attempt.
	WebhookAllowPrivate bool          `yaml:"webhook_allow_private"`
	WebhookTimeout      time.Duration `yaml:"webhook_timeout"`
	// WebhookRetrySchedule is the waits after an event's failed attempts,
	// comma-separated Go durations ("5s,30s,2m"; ParseRetrySchedule), the
	// last repeating until the event expires a day after it was written.
	WebhookRetrySchedule string `yaml:"webhook_retry_schedule"`
	DB                   DB     `yaml:"db"`
	// OIDC is console sign-in through an OpenID Connect provider.
	OIDC OIDC `yaml:"oidc"`
	Log  Log  `yaml:"log"`
}

// Events configures engagement: the signed event token every message
// carries (data["pushfan"]) and the public routes apps report to.
type Events struct {
	// Tracking is "on" (every broadcast's messages carry a token, unless
	// the broadcast says "track": false) or "off".
	Tracking string `yaml:"tracking"`
	// Keys are "kid:secret" pairs: the first signs, all verify. Empty:
	// pushfan generates a key at first start and keeps it in the database.
	// Secrets come from the environment only.
	Keys []string `yaml:"-"`
	// TTL is how long after its send a token's events are taken.
	TTL time.Duration `yaml:"ttl"`
	// Origins may post events from a browser (CORS); "*" is any.
	Origins []string `yaml:"origins"`
	// PerAddress is how many event posts a second one client address may make (a burst of twice that).
	PerAddress float64 `yaml:"per_address"`
	// PublicURL is where apps reach pushfan's public routes (the click redirect); required when links are tracked.
	PublicURL string `yaml:"public_url"`
}

// Engine tunes the fan-out.
type Engine struct {
	// Concurrency is the most sending goroutines an instance runs: a
	// ceiling. Below it the pool follows what the rate needs at the latency
	// the sends see (rate × latency, with headroom).
	Concurrency int `yaml:"concurrency"`
	// PageSize is how many tokens one keyset page loads from MySQL.
	PageSize int `yaml:"page_size"`
	// SendTimeout bounds one attempt, the SDK's own 503 retry waits included.
	SendTimeout time.Duration `yaml:"send_timeout"`
	// MaxAttempts is the per-token budget of HTTP requests to FCM, counting
	// the SDK's own retries.
	MaxAttempts int `yaml:"max_attempts"`
	// RetryBaseDelay is the first backoff step (full jitter, doubling).
	RetryBaseDelay time.Duration `yaml:"retry_base_delay"`
	// RetryMaxDelay caps the total time a token may spend waiting to retry.
	RetryMaxDelay time.Duration `yaml:"retry_max_delay"`
	// RateLimit is messages per second for the FCM project, shared by every
	// instance sending to it (package quota).
	RateLimit float64 `yaml:"rate_limit"`
	// RateWindow is the span FCM counts its quota over (a minute): the
	// throttle keeps its burst within the window's quota.
	RateWindow time.Duration `yaml:"rate_window"`
	// TransactionalUsers: a user_ids broadcast of at most this many users
	// is transactional (urgent) unless it says otherwise.
	TransactionalUsers int `yaml:"transactional_users"`
	// RampUp is how long the rate takes to climb back to RateLimit after a 429 pause.
	RampUp time.Duration `yaml:"ramp_up"`
	// FlushInterval is how often a running chunk checkpoints: its cursor,
	// counters, failures and dead tokens reach MySQL, and its lease renews.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// Lease is how long a chunk stays claimed without a checkpoint; a
	// crashed instance's chunks are taken over after it.
	Lease time.Duration `yaml:"lease"`
	// ChunkWidth is how many targets one chunk holds (the plan cuts the
	// audience every ChunkWidth targets it counts).
	ChunkWidth int `yaml:"chunk_width"`
	// MaxChunks caps the chunks of one broadcast (chunks widen beyond).
	MaxChunks int `yaml:"max_chunks"`
	// ChunkParallel is how many chunks an instance sends at once.
	ChunkParallel int `yaml:"chunk_parallel"`
	// PlanParallel is how many broadcasts' audiences an instance plans at
	// once; 0 leaves planning to the other instances.
	PlanParallel int `yaml:"plan_parallel"`
	// PlanRetry is the first wait before a plan that failed is tried again
	// (doubling, at most a minute); after 5 failed attempts the broadcast
	// fails with the reason.
	PlanRetry time.Duration `yaml:"plan_retry"`
	// PollInterval is how often an idle instance looks for chunks.
	PollInterval time.Duration `yaml:"poll_interval"`
	// InstanceID names this instance in chunk leases (default host-pid-random).
	InstanceID string `yaml:"instance_id"`
	// MaxUserIDs caps the user_ids audience list.
	MaxUserIDs int `yaml:"max_user_ids"`
	// HandBackTimeout is how long the chunks of a broadcast may go on being
	// handed back by every instance that claims them (none can run it: a
	// named audience missing from every configuration) before it fails.
	HandBackTimeout time.Duration `yaml:"handback_timeout"`
	// Retention is how long finished broadcasts, their failures and old
	// skipped cron fires are kept.
	Retention time.Duration `yaml:"retention"`
	// AuditRetention is how long audit entries are kept.
	AuditRetention time.Duration `yaml:"audit_retention"`
	// OutcomeRetention: how long every target's kept outcome is kept; 0 keeps none.
	OutcomeRetention time.Duration `yaml:"outcome_retention"`
	// HoldExpiry is how long a held broadcast waits for its release
	// before it ends canceled ("hold expired").
	HoldExpiry time.Duration `yaml:"hold_expiry"`
	// ReleaseFourEyes requires a held broadcast to be released by another
	// admin token than the one that created it.
	ReleaseFourEyes bool `yaml:"release_four_eyes"`
	// StartSpread is how far past its send_at (or a cron fire past its
	// fire time) a broadcast may start, at an offset fixed per broadcast:
	// FCM traffic more than doubles in the first minute of every hour, and
	// broadcasts all due at :00 would add to that peak. 0 starts on time.
	StartSpread time.Duration `yaml:"start_spread"`
	// DefaultTimezone is the IANA zone of users without one (or with an
	// unknown one) for local-time delivery; QuietHours the deployment's
	// default quiet hours, "HH:MM-HH:MM" ("" for none).
	DefaultTimezone string `yaml:"default_timezone"`
	QuietHours      string `yaml:"quiet_hours"`
	// FrequencyCap is the deployment's cap on sends per user, e.g.
	// "1/2h,3/day" (ParseFrequencyCaps); "" for none. Transactional
	// broadcasts are exempt.
	FrequencyCap string `yaml:"frequency_cap"`
	// StaleAfter leaves out of every audience a token not refreshed for
	// this long (device_tokens.updated_at, or a mapped
	// schema.tokens.last_seen): Firebase counts a token a month without
	// a refresh as stale, and sends to it waste quota on phones that are
	// gone. 0, the default, sends to every valid token, as before.
	StaleAfter time.Duration `yaml:"stale_after"`
}

// HTTP configures the API server.
type HTTP struct {
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	BodyLimit         int64         `yaml:"body_limit"`
	// WaitTimeout is how long POST /push/broadcast waits for completion
	// before answering 202 with the current state.
	WaitTimeout time.Duration `yaml:"wait_timeout"`
	// ShutdownTimeout bounds graceful shutdown (in-flight sends included).
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// StatsCache is how long GET /push/stats may serve cached totals.
	StatsCache time.Duration `yaml:"stats_cache"`
	// BroadcastCache is how long GET /push/broadcasts/{id} may serve a
	// cached row (rows change only at checkpoints, every FlushInterval).
	BroadcastCache time.Duration `yaml:"broadcast_cache"`
	// ScheduleHorizon is how far ahead send_at may be.
	ScheduleHorizon time.Duration `yaml:"schedule_horizon"`
	// SubmitPerMinute limits POST /push/broadcast per admin token.
	SubmitPerMinute float64 `yaml:"submit_per_minute"`
	// TestSendsPerMinute limits POST /push/test per admin token: each one
	// sends real pushes (up to 20) while the caller waits.
	TestSendsPerMinute float64 `yaml:"test_sends_per_minute"`
	// SessionTTL is how long a console sign-in lasts (the cookie's and
	// the server's session's lifetime).
	SessionTTL time.Duration `yaml:"session_ttl"`
	// TokenSignIn lets the console sign in with an admin token (false:
	// only through the OIDC provider).
	TokenSignIn bool `yaml:"token_signin"`
	// SignInFailuresPerMinute limits failed authentications per client
	// address: wrong bearer tokens on any route and failed console
	// sign-ins, together, so a token cannot be guessed either way.
	SignInFailuresPerMinute float64 `yaml:"sign_in_failures_per_minute"`
	// TrustedProxies are the CIDRs of reverse proxies whose
	// X-Forwarded-For names the client (for the failure limit) and whose
	// X-Forwarded-Proto says the client used TLS (the session cookie's
	// Secure flag); empty: the connection's address is the client's, and
	// only a TLS connection to pushfan itself is TLS.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// PreviewsPerMinute limits the audience previews (POST /push/preview,
	// POST /push/audiences/{name}/preview) per admin token.
	PreviewsPerMinute float64 `yaml:"previews_per_minute"`
	// PreviewCache is how long a preview's count is kept and shared by
	// every caller of this instance (0: none): counting a large audience
	// reads all of it, and the console previews as the operator types.
	PreviewCache time.Duration `yaml:"preview_cache"`
}

// DB configures the MySQL pool.
type DB struct {
	MaxOpen int           `yaml:"max_open"`
	Timeout time.Duration `yaml:"timeout"`
}

// Log configures slog.
type Log struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// UsesEmulator reports whether FCM traffic goes to a non-Google endpoint
// (an emulator), where no credentials are needed.
func (c *Config) UsesEmulator() bool { return c.FCMEndpoint != "" }

// Defaults returns the configuration used when nothing is set.
func Defaults() Config {
	return Config{
		MySQLDSN:  "root@tcp(127.0.0.1:3306)/pushfan?parseTime=true",
		HTTPAddr:  ":8080",
		FCMClient: "direct",
		FCMHTTP2:  "pushfan",
		Engine: Engine{
			Concurrency:        4096,
			PageSize:           1000,
			SendTimeout:        10 * time.Second,
			MaxAttempts:        5,
			RetryBaseDelay:     500 * time.Millisecond,
			RetryMaxDelay:      2 * time.Minute,
			RateLimit:          9900, // just under FCM's default 600,000/min (10,000/s)
			RateWindow:         time.Minute,
			TransactionalUsers: 100,
			RampUp:             10 * time.Second,
			// 50 ms: a kill -9 repeats at most the sends in flight plus
			// the ~50 ms of sends since the last checkpoint.
			FlushInterval:    50 * time.Millisecond,
			Lease:            10 * time.Second,
			ChunkWidth:       10000,
			MaxChunks:        10000,
			PlanParallel:     2,
			PlanRetry:        time.Second,
			ChunkParallel:    4,
			PollInterval:     500 * time.Millisecond,
			MaxUserIDs:       10000,
			HandBackTimeout:  10 * time.Minute,
			Retention:        90 * 24 * time.Hour,
			AuditRetention:   400 * 24 * time.Hour,
			OutcomeRetention: 30 * 24 * time.Hour,
			HoldExpiry:       7 * 24 * time.Hour,
			StartSpread:      5 * time.Second,
			DefaultTimezone:  "UTC",
		},
		Delivery:       defaultDelivery(),
		OIDC:           OIDC{RolesClaim: "groups"},
		Events:         Events{Tracking: "on", TTL: 7 * 24 * time.Hour, PerAddress: 20},
		WebhookTimeout: 10 * time.Second,
		// 5 s, 30 s, 2 min, 10 min, 30 min, then hourly: quick for a blip,
		// then sparse for a receiver that is down.
		WebhookRetrySchedule: "5s,30s,2m,10m,30m,1h",
		HTTP: HTTP{
			ReadTimeout:       15 * time.Second,
			ReadHeaderTimeout: 5 * time.Second,
			WriteTimeout:      60 * time.Second,
			IdleTimeout:       120 * time.Second,
			BodyLimit:         1 << 20,
			WaitTimeout:       25 * time.Second,
			ShutdownTimeout:   30 * time.Second,
			SubmitPerMinute:   30,
			ScheduleHorizon:   30 * 24 * time.Hour,
			StatsCache:        time.Second,
			BroadcastCache:    250 * time.Millisecond,

			TestSendsPerMinute: 10,

			SessionTTL:              12 * time.Hour,
			TokenSignIn:             true,
			SignInFailuresPerMinute: 5,

			PreviewsPerMinute: 60,
			PreviewCache:      30 * time.Second,
		},
		DB:  DB{MaxOpen: 40, Timeout: 10 * time.Second},
		Log: Log{Level: "info", Format: "json"},
	}
}

// Webhook is one endpoint as the YAML config gives it: a name, an http(s)
// URL, a Standard Webhooks secret ("whsec_…") and the event types it takes
// (none: all).
type Webhook struct {
	Name   string   `yaml:"name"`
	URL    string   `yaml:"url"`
	Secret string   `yaml:"secret"`
	Events []string `yaml:"events"`
}
