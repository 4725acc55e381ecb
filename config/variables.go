package config

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// variable is one environment variable: the field it sets, what it does,
// and the bounds it is held to. The table of them (variables) is the one
// list of pushfan's settings: Load sets the fields through it,
// ValidateParts checks its rules, Effective prints it (`pushfan config
// check`), and Reference writes docs/configuration.md from it, so the
// reference cannot drift from the code.
type variable struct {
	name string
	set  func(string) error
	// part is the subcommands' group that validates it; zero is PartServe.
	part Part
	// doc says what the setting does, in a sentence for an operator.
	doc string
	// unset says what an empty value means (the default when the field's
	// default is empty), e.g. "none: the admin API refuses all".
	unset string
	// rule is checked by ValidateParts and printed as the bounds.
	rule rule
}

// rule is a bound on one setting: text for the reference, and a check
// that returns the problem ("" when the value is within it). A rule with
// no check is enforced by hand in validate.go (it spans several settings,
// or its message explains why); its text still says what it is.
type rule struct {
	text  string
	check func() string
}

// and adds a bound that validate.go checks by hand (one that involves
// another setting) to the text of a rule checked here.
func (r rule) and(text string) rule {
	if r.text == "" {
		r.text = text
	} else {
		r.text += "; " + text
	}
	return r
}

// deliveryRule is a rule checked by one of delivery.go's checks.
func deliveryRule(problem func() string, text string) rule {
	return rule{text: text, check: problem}
}

// note is a rule that validate.go checks by hand.
func note(text string) rule { return rule{text: text} }

func intRange(p *int, lo, hi int) rule {
	return rule{
		text: fmt.Sprintf("%d to %d", lo, hi),
		check: func() string {
			if *p < lo || *p > hi {
				return fmt.Sprintf("must be between %d and %d, got %d", lo, hi, *p)
			}
			return ""
		},
	}
}

func durRange(p *time.Duration, lo, hi time.Duration) rule {
	return rule{
		text: fmt.Sprintf("%s to %s", shortDuration(lo), shortDuration(hi)),
		check: func() string {
			if *p < lo || *p > hi {
				return fmt.Sprintf("must be between %s and %s, got %v", shortDuration(lo), shortDuration(hi), *p)
			}
			return ""
		},
	}
}

func positive(p *time.Duration) rule {
	return rule{
		text: "above 0",
		check: func() string {
			if *p <= 0 {
				return fmt.Sprintf("must be a positive duration, got %v", *p)
			}
			return ""
		},
	}
}

func nonNegative(p *time.Duration) rule {
	return rule{
		text: "0 or more",
		check: func() string {
			if *p < 0 {
				return fmt.Sprintf("must not be negative, got %v", *p)
			}
			return ""
		},
	}
}

// positiveRate is a positive, finite rate; what says of what, for the
// message ("broadcasts per minute per token").
func positiveRate(p *float64, what string) rule {
	return rule{
		text: "above 0",
		check: func() string {
			if *p <= 0 || math.IsInf(*p, 0) || math.IsNaN(*p) {
				return fmt.Sprintf("must be a positive number of %s, got %v", what, *p)
			}
			return ""
		},
	}
}

// atLeast is a lower bound with its reason, which the message gives.
func atLeast(p *time.Duration, lo time.Duration, why string) rule {
	return rule{
		text: fmt.Sprintf("at least %s (%s)", shortDuration(lo), why),
		check: func() string {
			if *p < lo {
				return fmt.Sprintf("must be at least %s (%s), got %v", shortDuration(lo), why, *p)
			}
			return ""
		},
	}
}

func maxLen(p *string, n int) rule {
	return rule{
		text: fmt.Sprintf("at most %d characters", n),
		check: func() string {
			if len(*p) > n {
				return fmt.Sprintf("must be at most %d characters", n)
			}
			return ""
		},
	}
}

// oneOf accepts one of choices; fold ignores case (log levels).
func oneOf(p *string, fold bool, choices ...string) rule {
	list := choices[0]
	if n := len(choices); n > 1 {
		list = strings.Join(choices[:n-1], ", ") + " or " + choices[n-1]
	}
	return rule{
		text: list,
		check: func() string {
			for _, c := range choices {
				if *p == c || fold && strings.EqualFold(*p, c) {
					return ""
				}
			}
			return fmt.Sprintf("must be %s, got %q", list, *p)
		},
	}
}

// shortDuration prints a duration without its trailing zero units (1m,
// not 1m0s; 720h, not 720h0m0s), as an operator would write it.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// variables is the table of every environment variable pushfan reads (but
// PUSHFAN_CONFIG, which names the file), bound to the fields of c, in the
// order `pushfan config check` prints them and docs/configuration.md lists
// them.
func variables(c *Config) []variable {
	e, h, d := &c.Engine, &c.HTTP, &c.Delivery
	return []variable{
		{name: "PUSHFAN_MYSQL_DSN", set: str(&c.MySQLDSN), part: PartDatabase,
			doc:  "go-sql-driver DSN of pushfan's database; `serve` and `migrate` create the database if it is missing",
			rule: note("a DSN that names a database")},
		{name: "PUSHFAN_HTTP_ADDR", set: str(&c.HTTPAddr),
			doc:  "the API's (and the console's) listen address",
			rule: note("host:port")},
		{name: "PUSHFAN_FCM_ENDPOINT", set: str(&c.FCMEndpoint),
			doc:   "FCM base URL; set it to an emulator, e.g. `http://127.0.0.1:9099/v1`, which needs no credentials",
			unset: "Google's (`https://fcm.googleapis.com/v1`)",
			rule:  note("an http(s) URL")},
		{name: "PUSHFAN_FCM_PROJECT_ID", set: str(&c.FCMProjectID),
			doc:   "Firebase project id",
			unset: "from the credentials",
			rule:  note("required with PUSHFAN_FCM_ENDPOINT")},
		{name: "PUSHFAN_FCM_CA_FILE", set: str(&c.FCMCAFile),
			doc:  "a PEM bundle to trust for the FCM endpoint: an emulator's self-signed CA",
			rule: note("a readable file")},
		{name: "PUSHFAN_FCM_H2C", set: boolean(&c.FCMH2C),
			doc:  "speak HTTP/2 without TLS (h2c) to an `http://` emulator",
			rule: note("needs an http:// PUSHFAN_FCM_ENDPOINT")},
		{name: "PUSHFAN_FCM_CLIENT", set: str(&c.FCMClient),
			doc: "`direct`: each request body is encoded once per message and the token spliced in; `sdk`: `messaging.Client.Send` per token. " +
				"Same request, headers and error handling (a test checks byte for byte); `direct` costs about a third less CPU per send",
			rule: oneOf(&c.FCMClient, false, "direct", "sdk")},
		{name: "PUSHFAN_FCM_HTTP2", set: str(&c.FCMHTTP2),
			doc: "the direct client's HTTP/2 client for TLS (and h2c) endpoints: `pushfan`, its own (`fcm/transport/h2*.go`: the frames of many requests in one TLS write, no goroutine per request), " +
				"or `net/http`, Go's. Same request bytes, headers (less `Accept-Encoding`) and classification; falls back to net/http's HTTP/1.1 when the server does not negotiate h2. " +
				"To a plain `http://` endpoint, `pushfan` also means its own HTTP/1.1 client (`fcm/transport/h1*.go`) and `net/http` Go's transport",
			rule: oneOf(&c.FCMHTTP2, false, "pushfan", "net/http")},
		{name: "GOOGLE_APPLICATION_CREDENTIALS", set: str(&c.CredentialsFile),
			doc:  "service-account JSON key for real FCM (environment only); the project id is read from it",
			rule: note("required, and readable, when PUSHFAN_FCM_ENDPOINT is unset")},
		{name: "PUSHFAN_ADMIN_TOKENS", set: list(&c.AdminTokens),
			doc: "comma-separated admin API tokens (environment only): a bare secret (named `admin-N`, role `admin`), or `name:role:secret`, or `name:role:sha256:<64 hex digits>`; " +
				"roles are `viewer`, `sender`, `approver` and `admin` (docs/security.md#admin-tokens-and-roles)",
			unset: "none: the admin API refuses all",
			rule:  note("secrets of at least 16 characters; names unique")},
		{name: "PUSHFAN_INTERNAL_TOKEN", set: str(&c.InternalToken),
			doc:   "bearer token for `/internal/*` (the cron trigger), environment only; admin tokens are refused there",
			unset: "none: `/internal/*` refuses all",
			rule:  note("at least 16 characters")},
		{name: "PUSHFAN_METRICS_ADDR", set: str(&c.MetricsAddr),
			doc:   "a listener of its own serving only `GET /metrics` and `/debug/pprof/`, for a private network (e.g. `127.0.0.1:9090`); no token there unless PUSHFAN_METRICS_TOKEN is set",
			unset: "none",
			rule:  note("host:port other than PUSHFAN_HTTP_ADDR")},
		{name: "PUSHFAN_METRICS_TOKEN", set: str(&c.MetricsToken),
			doc:   "bearer token for `GET /metrics` only (environment only); admin tokens are accepted there too",
			unset: "none: only admin tokens read the metrics",
			rule:  note("at least 16 characters")},
		{name: "PUSHFAN_CONCURRENCY", set: integer(&e.Concurrency),
			doc:  "the most sending goroutines per instance: a ceiling (it also bounds memory and connections), shared by [several apps](apps.md) in proportion to their rate limits. Below it the pool follows rate × observed latency × 1.25 + 16",
			rule: intRange(&e.Concurrency, 1, 20000)},
		{name: "PUSHFAN_PAGE_SIZE", set: integer(&e.PageSize),
			doc:  "tokens per keyset page read from MySQL",
			rule: intRange(&e.PageSize, 1, 100000)},
		{name: "PUSHFAN_SEND_TIMEOUT", set: duration(&e.SendTimeout),
			doc:  "bound on one attempt, including the SDK's own retry waits",
			rule: positive(&e.SendTimeout)},
		{name: "PUSHFAN_MAX_ATTEMPTS", set: integer(&e.MaxAttempts),
			doc:  "HTTP requests per token, including the SDK's own retries",
			rule: intRange(&e.MaxAttempts, 1, 100)},
		{name: "PUSHFAN_RETRY_BASE_DELAY", set: duration(&e.RetryBaseDelay),
			doc:  "first backoff step of a retry (full jitter, doubling)",
			rule: positive(&e.RetryBaseDelay)},
		{name: "PUSHFAN_RETRY_MAX_DELAY", set: duration(&e.RetryMaxDelay),
			doc:  "total retry time per token; also caps a 429's announced pause",
			rule: positive(&e.RetryMaxDelay)},
		{name: "PUSHFAN_RATE_LIMIT", set: float(&e.RateLimit),
			doc:  "messages a second for the FCM project, shared by every instance sending to it (just under FCM's 600k/min = 10k/s)",
			rule: positiveRate(&e.RateLimit, "messages per second")},
		{name: "PUSHFAN_RATE_WINDOW", set: duration(&e.RateWindow),
			doc:  "the span FCM counts its quota over: the limiter's burst and a send's late arrival are taken off the rate so that no window admits more than the limit × window",
			rule: positive(&e.RateWindow)},
		{name: "PUSHFAN_RAMP_UP", set: duration(&e.RampUp),
			doc:  "how long the rate takes to climb back to the limit after a 429 pause",
			rule: positive(&e.RampUp)},
		{name: "PUSHFAN_FLUSH_INTERVAL", set: duration(&e.FlushInterval),
			doc:  "chunk checkpoint period (cursor, done ranges, counters, failures, lease renewal); what a `kill -9` can repeat beyond the sends in flight",
			rule: positive(&e.FlushInterval)},
		{name: "PUSHFAN_LEASE", set: duration(&e.Lease),
			doc:  "chunk lease; a dead instance's chunks are taken over after it",
			rule: positive(&e.Lease).and("at least 3 × PUSHFAN_FLUSH_INTERVAL")},
		{name: "PUSHFAN_CHUNK_WIDTH", set: integer(&e.ChunkWidth),
			doc:  "targets per chunk, as the plan counts them",
			rule: intRange(&e.ChunkWidth, 1, 100000000)},
		{name: "PUSHFAN_MAX_CHUNKS", set: integer(&e.MaxChunks),
			doc:  "chunks a plan over the highest token id may make at most (wider chunks beyond: 10,000 targets a chunk up to 100M token ids)",
			rule: intRange(&e.MaxChunks, 1, 100000)},
		{name: "PUSHFAN_CHUNK_PARALLEL", set: integer(&e.ChunkParallel),
			doc:  "chunks of each class (bulk, transactional, paced) one instance sends at once; they share the worker pool",
			rule: intRange(&e.ChunkParallel, 1, 64).and("at most PUSHFAN_CONCURRENCY")},
		{name: "PUSHFAN_PLAN_PARALLEL", set: integer(&e.PlanParallel),
			doc:  "broadcasts one instance plans at once; 0: this instance plans none (the others do)",
			rule: intRange(&e.PlanParallel, 0, 64)},
		{name: "PUSHFAN_PLAN_RETRY", set: duration(&e.PlanRetry),
			doc:  "the first wait before a plan that failed is tried again (doubling, at most 1m); the 5th failed attempt fails the broadcast with the reason",
			rule: durRange(&e.PlanRetry, time.Millisecond, time.Minute)},
		{name: "PUSHFAN_POLL_INTERVAL", set: duration(&e.PollInterval),
			doc:  "how often an idle instance looks for chunks",
			rule: positive(&e.PollInterval)},
		{name: "PUSHFAN_INSTANCE_ID", set: str(&e.InstanceID),
			doc:   "this instance's name in leases; may be pinned (a StatefulSet pod name): a restart resumes its own chunks once their leases expire",
			unset: "host-pid-random",
			rule:  maxLen(&e.InstanceID, 64)},
		{name: "PUSHFAN_MAX_USER_IDS", set: integer(&e.MaxUserIDs),
			doc:  "cap on `audience.user_ids`",
			rule: intRange(&e.MaxUserIDs, 1, 1000000)},
		{name: "PUSHFAN_TRANSACTIONAL_USERS", set: integer(&e.TransactionalUsers),
			doc:  "a `user_ids` broadcast of at most this many users is `transactional` unless it names a class",
			rule: note("0 to PUSHFAN_MAX_USER_IDS")},
		{name: "PUSHFAN_HANDBACK_TIMEOUT", set: duration(&e.HandBackTimeout),
			doc:  "how long a broadcast's chunks may go on being handed back by every instance that claims them (none can run it) before it fails",
			rule: positive(&e.HandBackTimeout)},
		{name: "PUSHFAN_RETENTION", set: duration(&e.Retention),
			doc:  "finished broadcasts, their failures and old skipped cron fires are deleted after this",
			rule: atLeast(&e.Retention, 24*time.Hour, "idempotency keys are kept with their broadcast for a day")},
		{name: "PUSHFAN_AUDIT_RETENTION", set: duration(&e.AuditRetention),
			doc:  "audit entries (docs/audit.md) are deleted after this",
			rule: atLeast(&e.AuditRetention, 24*time.Hour, "an audit trail kept less than a day says little")},
		{name: "PUSHFAN_OUTCOME_RETENTION", set: duration(&e.OutcomeRetention),
			doc:  "every target's kept outcome (a user's deliveries, a broadcast's export) is deleted this long after its broadcast finished, or with it; `0` keeps none (no deliveries, no export; the counts as ever)",
			rule: note("0 (keep none), or at least 1h (a running broadcast's outcomes must outlive it)")},
		{name: "PUSHFAN_HOLD_EXPIRY", set: duration(&e.HoldExpiry),
			doc:  "a held broadcast not released within this ends `canceled` (\"hold expired\")",
			rule: positive(&e.HoldExpiry)},
		{name: "PUSHFAN_RELEASE_FOUR_EYES", set: boolean(&e.ReleaseFourEyes),
			doc: "`true`: a held broadcast must be released by another admin token than the one that created it"},
		{name: "PUSHFAN_START_SPREAD", set: duration(&e.StartSpread),
			doc:  "scheduled broadcasts and cron fires start this much after their time at most, at an offset fixed per broadcast (`starts_at`), to stay off FCM's top-of-the-hour peak; `0` starts them on time",
			rule: durRange(&e.StartSpread, 0, MaxStartSpread)},
		{name: "PUSHFAN_DEFAULT_TIMEZONE", set: str(&e.DefaultTimezone),
			doc:  "IANA zone of users without one (or with an unknown one) for `send_at_local` and quiet hours",
			rule: note("an IANA zone name")},
		{name: "PUSHFAN_QUIET_HOURS", set: str(&e.QuietHours),
			doc:   "default quiet hours of every bulk and paced broadcast, whatever its audience (never transactional ones; a request's `\"quiet_hours\": false` turns it off), e.g. `22:00-08:00`",
			unset: "none",
			rule:  note("HH:MM-HH:MM (or HH:MM:SS), start ≠ end")},
		{name: "PUSHFAN_FREQUENCY_CAP", set: str(&e.FrequencyCap),
			doc: "the deployment's cap on pushes per user, counted per user across broadcasts: `N/day` (the user's local calendar day, from their zone or " +
				"PUSHFAN_DEFAULT_TIMEZONE) or a rolling `N/6h`, several joined by commas (`1/2h,3/day`). Bulk broadcasts only: transactional ones, test sends " +
				"and dry runs are exempt, and a request's `\"frequency_cap\": false` goes past it. Named caps for audiences and jobs: `frequency_caps:` in the YAML",
			unset: "none",
			rule:  note("N/day or N/<duration>, comma-separated")},
		{name: "PUSHFAN_STALE_AFTER", set: days(&e.StaleAfter),
			doc: "leave out of every audience (all, user_ids, named ones, resends, a test send's user_ids) a token not refreshed for this long, read from `device_tokens.updated_at` " +
				"(or a mapped `schema.tokens.last_seen`), as an invalidated one is left out: Firebase counts a token unrefreshed for a month as stale and drops it after 270 days. " +
				"A preview reports how many were left out (`stale`); `pushfan_stale_tokens_skipped_total` counts them as broadcasts skip them. E.g. `30d` or `720h` (the YAML takes Go durations only: `720h`). See [Stale tokens](fcm.md#stale-tokens)",
			unset: "off: every valid token is sent to",
			rule:  staleAfterRule(&e.StaleAfter)},
		{name: "PUSHFAN_BULK_ANDROID_PRIORITY", set: str(&d.Bulk.AndroidPriority),
			doc:  "Android `priority` of bulk and paced broadcasts where the request's `android` sets none: Firebase asks that traffic that is not urgent go at `normal` (Android demotes an app whose `high` messages show nothing). YAML `delivery.bulk.android_priority`; an app's own under `apps[].delivery`",
			rule: deliveryRule(func() string { return androidPriorityProblem(d.Bulk.AndroidPriority, false) }, "normal or high")},
		{name: "PUSHFAN_BULK_APNS_PRIORITY", set: str(&d.Bulk.APNSPriority),
			doc:  "`apns-priority` of bulk and paced broadcasts where the request's `apns` sets none (a message without a notification always goes at 5, as APNs requires)",
			rule: deliveryRule(func() string { return apnsPriorityProblem(d.Bulk.APNSPriority, false) }, "10, 5 or 1")},
		{name: "PUSHFAN_BULK_TTL", set: duration(&d.Bulk.TTL),
			doc:  "how long FCM and the platforms keep a bulk broadcast's message for an offline device (Android `ttl`, `apns-expiration`, web push `TTL`) where the request sets none",
			rule: deliveryRule(func() string { return ttlProblem(d.Bulk.TTL, false) }, "1s to 672h, whole seconds")},
		{name: "PUSHFAN_TRANSACTIONAL_ANDROID_PRIORITY", set: str(&d.Transactional.AndroidPriority),
			doc:  "Android `priority` of transactional broadcasts and test sends where the request's `android` sets none",
			rule: deliveryRule(func() string { return androidPriorityProblem(d.Transactional.AndroidPriority, false) }, "normal or high")},
		{name: "PUSHFAN_TRANSACTIONAL_APNS_PRIORITY", set: str(&d.Transactional.APNSPriority),
			doc:  "`apns-priority` of transactional broadcasts and test sends where the request's `apns` sets none",
			rule: deliveryRule(func() string { return apnsPriorityProblem(d.Transactional.APNSPriority, false) }, "10, 5 or 1")},
		{name: "PUSHFAN_TRANSACTIONAL_TTL", set: duration(&d.Transactional.TTL),
			doc:  "how long a transactional message is kept for an offline device where the request sets none: a code or an alert is stale sooner than a campaign",
			rule: deliveryRule(func() string { return ttlProblem(d.Transactional.TTL, false) }, "1s to 672h, whole seconds")},
		{name: "PUSHFAN_HTTP_READ_TIMEOUT", set: duration(&h.ReadTimeout),
			doc:  "the API server's read timeout",
			rule: positive(&h.ReadTimeout)},
		{name: "PUSHFAN_HTTP_READ_HEADER_TIMEOUT", set: duration(&h.ReadHeaderTimeout),
			doc:  "the API server's read-header timeout",
			rule: positive(&h.ReadHeaderTimeout)},
		{name: "PUSHFAN_HTTP_WRITE_TIMEOUT", set: duration(&h.WriteTimeout),
			doc:  "the API server's write timeout (also bounds a CPU profile on the metrics listener)",
			rule: positive(&h.WriteTimeout)},
		{name: "PUSHFAN_HTTP_IDLE_TIMEOUT", set: duration(&h.IdleTimeout),
			doc:  "the API server's idle-connection timeout",
			rule: positive(&h.IdleTimeout)},
		{name: "PUSHFAN_HTTP_BODY_LIMIT", set: int64v(&h.BodyLimit),
			doc:  "request body limit in bytes (over it: 413)",
			rule: note("at least 1024")},
		{name: "PUSHFAN_WAIT_TIMEOUT", set: duration(&h.WaitTimeout),
			doc:  "how long `POST /push/broadcast` waits for the broadcast to finish before answering 202",
			rule: positive(&h.WaitTimeout).and("shorter than PUSHFAN_HTTP_WRITE_TIMEOUT")},
		{name: "PUSHFAN_SHUTDOWN_TIMEOUT", set: duration(&h.ShutdownTimeout),
			doc:  "graceful shutdown deadline, in-flight sends included",
			rule: positive(&h.ShutdownTimeout)},
		{name: "PUSHFAN_SUBMIT_PER_MINUTE", set: float(&h.SubmitPerMinute),
			doc:  "`POST /push/broadcast` per admin token (burst: 10 s worth); over it, 429 with `Retry-After`",
			rule: positiveRate(&h.SubmitPerMinute, "broadcasts per minute per token")},
		{name: "PUSHFAN_TEST_SENDS_PER_MINUTE", set: float(&h.TestSendsPerMinute),
			doc:  "`POST /push/test` per admin token (burst: 10 s worth, at least 1)",
			rule: positiveRate(&h.TestSendsPerMinute, "test sends per minute per token")},
		{name: "PUSHFAN_SESSION_TTL", set: duration(&h.SessionTTL),
			doc:  "how long a console sign-in lasts",
			rule: durRange(&h.SessionTTL, time.Minute, 30*24*time.Hour)},
		{name: "PUSHFAN_TOKEN_SIGNIN", set: boolean(&h.TokenSignIn),
			doc:  "let the console sign in with an admin token; false: only through the OIDC provider (`POST /console/api/session` answers 403 `token_signin_disabled`)",
			rule: note("false needs PUSHFAN_OIDC_ISSUER")},
		{name: "PUSHFAN_OIDC_ISSUER", set: str(&c.OIDC.Issuer),
			doc:   "the OpenID Connect provider people sign in to the console with (its discovery document is ISSUER/.well-known/openid-configuration); see [Security](security.md#signing-in-with-an-oidc-provider)",
			unset: "none: no OIDC sign-in",
			rule:  note("an http(s) URL; needs PUSHFAN_OIDC_CLIENT_ID, PUSHFAN_PUBLIC_URL and oidc.roles in the YAML")},
		{name: "PUSHFAN_OIDC_CLIENT_ID", set: str(&c.OIDC.ClientID),
			doc:   "the client id pushfan is registered under at the provider, with the redirect URI PUSHFAN_PUBLIC_URL + `/console/oidc/callback`",
			unset: "none",
			rule:  note("required with PUSHFAN_OIDC_ISSUER")},
		{name: "PUSHFAN_OIDC_CLIENT_SECRET", set: str(&c.OIDC.ClientSecret),
			doc:   "the client's secret at the provider (environment only)",
			unset: "none: a public client (PKCE only)",
			rule:  note("as the provider issued it")},
		{name: "PUSHFAN_OIDC_ROLES_CLAIM", set: str(&c.OIDC.RolesClaim),
			doc:  "the ID token's claim that lists a person's groups (a list of strings, or one string), mapped to roles by `oidc.roles` in the YAML",
			rule: note("a claim name")},
		{name: "PUSHFAN_SIGNIN_FAILURES_PER_MINUTE", set: float(&h.SignInFailuresPerMinute),
			doc:  "failed authentications per client address: wrong bearer tokens on any route and failed console sign-ins together (burst: a minute's worth); see [Security](security.md#authentication)",
			rule: positiveRate(&h.SignInFailuresPerMinute, "failed authentications (wrong bearer tokens and sign-ins) per minute per client address")},
		{name: "PUSHFAN_TRUSTED_PROXIES", set: list(&h.TrustedProxies),
			doc:   "comma-separated CIDRs of reverse proxies whose `X-Forwarded-For` names the client (for the failed-authentication budget) and whose `X-Forwarded-Proto: https` makes the session cookie Secure",
			unset: "none",
			rule:  note("CIDRs such as 10.0.0.0/8")},
		{name: "PUSHFAN_PREVIEWS_PER_MINUTE", set: float(&h.PreviewsPerMinute),
			doc:  "audience previews (`POST /push/preview`, `POST /push/audiences/{name}/preview`) per admin token (burst: 10 s worth)",
			rule: positiveRate(&h.PreviewsPerMinute, "audience previews per minute per token")},
		{name: "PUSHFAN_PREVIEW_CACHE", set: duration(&h.PreviewCache),
			doc:  "how long a preview's count is kept and shared by every caller of the instance; 0: none",
			rule: durRange(&h.PreviewCache, 0, 10*time.Minute)},
		{name: "PUSHFAN_SCHEDULE_HORIZON", set: duration(&h.ScheduleHorizon),
			doc:  "how far ahead `send_at` (and `send_at_local` in the earliest zone) may be",
			rule: positive(&h.ScheduleHorizon)},
		{name: "PUSHFAN_STATS_CACHE", set: duration(&h.StatsCache),
			doc:  "how long `GET /push/stats` may serve cached totals (a polling dashboard must not slow sends)",
			rule: nonNegative(&h.StatsCache)},
		{name: "PUSHFAN_BROADCAST_CACHE", set: duration(&h.BroadcastCache),
			doc: "how long `GET /push/broadcasts/{id}` may serve a cached row and its engagement counts (a poll a quarter second old is as good to an admin, and cheaper than a query per poll; " +
				"an instance drops its entry when it cancels or finishes the broadcast)",
			rule: nonNegative(&h.BroadcastCache)},
		{name: "PUSHFAN_TRACKING", set: str(&c.Events.Tracking),
			doc:  "`on`: every message carries a signed event token in `data[\"pushfan\"]` (a broadcast may say `\"track\": false`); `off`: none",
			rule: oneOf(&c.Events.Tracking, false, "on", "off")},
		{name: "PUSHFAN_EVENT_KEYS", set: list(&c.Events.Keys),
			doc: "`kid:secret,...` (environment only): the first signs event tokens, all verify, so a key rotates by going first and staying until its tokens expire; " +
				"unset: pushfan generates one at first start and keeps it in the database, shared by every replica",
			unset: "generated",
			rule:  note("key ids of 1 to 16 letters, digits, - or _, unique; secrets of 32 bytes or more")},
		{name: "PUSHFAN_EVENT_TTL", set: duration(&c.Events.TTL),
			doc:  "how long after its send a token's events are taken (then `expired`)",
			rule: durRange(&c.Events.TTL, time.Minute, MaxEventTTL).and("shorter than PUSHFAN_RETENTION")},
		{name: "PUSHFAN_EVENT_ORIGINS", set: list(&c.Events.Origins),
			doc:   "browser origins allowed to post events (CORS), comma-separated; `*` is any",
			unset: "none",
			rule:  note("origins such as https://app.example.com, or *")},
		{name: "PUSHFAN_EVENT_RATE_PER_ADDRESS", set: float(&c.Events.PerAddress),
			doc:  "event posts a second one client address may make (a burst of twice that)",
			rule: note("above 0, at most 1000000")},
		{name: "PUSHFAN_PUBLIC_URL", set: str(&c.Events.PublicURL),
			doc:   "where apps and browsers reach pushfan: the base of the click redirect `/v1/c/{token}` and of the OIDC redirect URI (`/console/oidc/callback`)",
			unset: "none: links are sent as they are",
			rule:  note("an http(s) URL")},
		{name: "PUSHFAN_WEBHOOK_ALLOW_PRIVATE", set: boolean(&c.WebhookAllowPrivate),
			doc: "let webhooks reach private, loopback and link-local addresses (checked on the address connected to, after DNS)"},
		{name: "PUSHFAN_WEBHOOK_TIMEOUT", set: duration(&c.WebhookTimeout),
			doc:  "deadline of one webhook attempt",
			rule: durRange(&c.WebhookTimeout, time.Second, time.Minute)},
		{name: "PUSHFAN_WEBHOOK_RETRY_SCHEDULE", set: str(&c.WebhookRetrySchedule),
			doc: "the waits after a webhook event's failed attempts, comma-separated durations: the nth failure waits the nth step, every one past the list the last, each ±20 %; " +
				"an event still failing a day after it was written expires (and disables its endpoint) whatever the schedule",
			rule: note(fmt.Sprintf("1 to %d durations, each above 0 and at most %s", maxRetrySteps, shortDuration(maxRetryStep)))},
		{name: "PUSHFAN_DB_MAX_OPEN", set: integer(&c.DB.MaxOpen), part: PartDatabase,
			doc:  "database pool size",
			rule: intRange(&c.DB.MaxOpen, 1, 1000)},
		{name: "PUSHFAN_DB_TIMEOUT", set: duration(&c.DB.Timeout), part: PartDatabase,
			doc:  "deadline of every database call",
			rule: positive(&c.DB.Timeout)},
		{name: "PUSHFAN_LOG_LEVEL", set: str(&c.Log.Level), part: PartLog,
			doc:  "the least level logged",
			rule: oneOf(&c.Log.Level, true, "debug", "info", "warn", "error")},
		{name: "PUSHFAN_LOG_FORMAT", set: str(&c.Log.Format), part: PartLog,
			doc:  "slog's output: one JSON object a line, or text",
			rule: oneOf(&c.Log.Format, false, "json", "text")},
	}
}

// Variables lists every environment variable pushfan reads, PUSHFAN_CONFIG
// first, in the order of the table.
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

// checkRules checks the table's rules of the given parts against c.
func (c *Config) checkRules(parts Part) []error {
	var errs []error
	for _, v := range variables(c) {
		part := v.part
		if part == 0 {
			part = PartServe
		}
		if parts&part == 0 || v.rule.check == nil {
			continue
		}
		if msg := v.rule.check(); msg != "" {
			errs = append(errs, fmt.Errorf("%s: %s", v.name, msg))
		}
	}
	return errs
}
