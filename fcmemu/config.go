package fcmemu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"
)

// Error kinds accepted as keys of Config.ErrorRates: the FCM error codes the emulator can inject
// at random into otherwise-good sends.
const (
	KindUnavailable   = "UNAVAILABLE"
	KindInternal      = "INTERNAL"
	KindQuotaExceeded = "QUOTA_EXCEEDED"
	KindUnregistered  = "UNREGISTERED"
)

// randomKindList names the kinds ErrorRates accepts, for messages.
const randomKindList = KindUnavailable + ", " + KindInternal + ", " + KindQuotaExceeded + ", " + KindUnregistered

// Defaults used when the matching Config field is left at zero.
const (
	DefaultQuotaWindow  = time.Minute
	DefaultHangMax      = 10 * time.Minute
	DefaultBackoffGrace = 250 * time.Millisecond
)

// Config is the behaviour of an Emulator. The zero value is a fast, error-free FCM with no quota.
// It can be replaced at runtime (SetConfig, PUT /emulator/config); every request uses one
// consistent snapshot.
//
// In JSON (GET/PUT /emulator/config) fields are snake_case and durations are strings such as
// "30ms" or "1m". A PUT replaces only the fields present in the body; error_rates, when present,
// replaces the whole map.
type Config struct {
	// Latency is waited before answering every send request, to emulate FCM's round trip. The
	// wait ends early, without an answer, if the client's request context is done.
	Latency time.Duration
	// Jitter adds a uniform random extra wait in [0, Jitter) on top of Latency.
	Jitter time.Duration

	// ErrorRates is the probability, per send of an otherwise-good token, of answering with a
	// given error instead of success. Keys are KindUnavailable (503), KindInternal (500),
	// KindQuotaExceeded (429 FcmError shape, Retry-After 1) and KindUnregistered (404, sticky
	// per token). Each rate is in [0,1] and their sum must not exceed 1.
	ErrorRates map[string]float64

	// QuotaLimit is the number of send requests allowed per QuotaWindow (every request that
	// reaches the quota check: validate_only and invalid ones included, storm answers
	// excluded); 0 disables the quota. Over it, a request gets 429 in the project-quota shape
	// with Retry-After = whole seconds (rounded up) until the window refills.
	QuotaLimit int
	// QuotaWindow is the length of the fixed quota window (default 1m). A window starts at the
	// first request and the next one at the first request after it ended, like FCM's unaligned
	// per-minute quota.
	QuotaWindow time.Duration

	// StormAfter is the number of accepted sends, counted from when the storm was armed (New,
	// Reset, or a config change of StormAfter/StormFor), after which a storm starts. 0 starts it
	// at the next send.
	StormAfter int
	// StormFor is how long a storm lasts; 0 disables storms. During a storm every send gets 429
	// in the project-quota shape with Retry-After = seconds left in the storm (rounded up, at
	// least 1). A storm happens once per arming.
	StormFor time.Duration

	// HangMax bounds how long a hang- token hangs (default 10m); then it answers 503.
	HangMax time.Duration

	// BackoffGrace is how long after a project 429 (quota or storm) arrivals are not yet counted
	// as RequestsDuringBackoff: requests a concurrent client had already sent before the 429
	// reached it. 0 means DefaultBackoffGrace; a negative value counts from the 429 itself.
	// Per-token 429s have no grace: only the client's own retry can arrive early.
	BackoffGrace time.Duration

	// Seed feeds the hash that makes the random choices (error rates, jitter); see the package
	// documentation.
	Seed int64
}

// normalize returns a copy with defaults applied and the map cloned, so the snapshot the hot
// path reads is never shared with the caller.
func (c Config) normalize() Config {
	if c.QuotaWindow == 0 {
		c.QuotaWindow = DefaultQuotaWindow
	}
	if c.HangMax == 0 {
		c.HangMax = DefaultHangMax
	}
	if c.BackoffGrace == 0 {
		c.BackoffGrace = DefaultBackoffGrace
	}
	c.ErrorRates = maps.Clone(c.ErrorRates)
	return c
}

// grace is the effective BackoffGrace of a normalized config.
func (c *Config) grace() time.Duration {
	return max(c.BackoffGrace, 0)
}

// Validate reports every field that makes no sense, each named by its JSON name.
func (c Config) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"latency", c.Latency}, {"jitter", c.Jitter}, {"quota_window", c.QuotaWindow},
		{"storm_for", c.StormFor}, {"hang_max", c.HangMax},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", d.name, d.v))
		}
	}
	if c.QuotaLimit < 0 {
		errs = append(errs, fmt.Errorf("quota_limit: must not be negative, got %d", c.QuotaLimit))
	}
	if c.StormAfter < 0 {
		errs = append(errs, fmt.Errorf("storm_after: must not be negative, got %d", c.StormAfter))
	}
	sum := 0.0
	for _, k := range sortedKeys(c.ErrorRates) {
		p := c.ErrorRates[k]
		if !isRandomKind(k) {
			errs = append(errs, fmt.Errorf("error_rates: unknown kind %q (want one of %s)", k, randomKindList))
			continue
		}
		if !(p >= 0 && p <= 1) { // also rejects NaN
			errs = append(errs, fmt.Errorf("error_rates: %s must be in [0,1], got %v", k, p))
			continue
		}
		sum += p
	}
	if sum > 1+1e-9 {
		errs = append(errs, fmt.Errorf("error_rates: rates sum to %v, more than 1", sum))
	}
	return errors.Join(errs...)
}

func isRandomKind(k string) bool {
	switch k {
	case KindUnavailable, KindInternal, KindQuotaExceeded, KindUnregistered:
		return true
	}
	return false
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// configJSON is the wire form of Config. Pointers tell "absent" from "zero" so that decoding
// into an existing Config changes only the fields present (PUT semantics).
type configJSON struct {
	Latency      *jsonDuration      `json:"latency,omitempty"`
	Jitter       *jsonDuration      `json:"jitter,omitempty"`
	ErrorRates   map[string]float64 `json:"error_rates,omitempty"`
	QuotaLimit   *int               `json:"quota_limit,omitempty"`
	QuotaWindow  *jsonDuration      `json:"quota_window,omitempty"`
	StormAfter   *int               `json:"storm_after,omitempty"`
	StormFor     *jsonDuration      `json:"storm_for,omitempty"`
	HangMax      *jsonDuration      `json:"hang_max,omitempty"`
	BackoffGrace *jsonDuration      `json:"backoff_grace,omitempty"`
	Seed         *int64             `json:"seed,omitempty"`
}

// MarshalJSON writes every field, durations as strings ("30ms").
func (c Config) MarshalJSON() ([]byte, error) {
	rates := c.ErrorRates
	if rates == nil {
		rates = map[string]float64{}
	}
	// Written with explicit fields (not configJSON) so zero values appear too.
	return json.Marshal(struct {
		Latency      string             `json:"latency"`
		Jitter       string             `json:"jitter"`
		ErrorRates   map[string]float64 `json:"error_rates"`
		QuotaLimit   int                `json:"quota_limit"`
		QuotaWindow  string             `json:"quota_window"`
		StormAfter   int                `json:"storm_after"`
		StormFor     string             `json:"storm_for"`
		HangMax      string             `json:"hang_max"`
		BackoffGrace string             `json:"backoff_grace"`
		Seed         int64              `json:"seed"`
	}{
		c.Latency.String(), c.Jitter.String(), rates, c.QuotaLimit, c.QuotaWindow.String(),
		c.StormAfter, c.StormFor.String(), c.HangMax.String(), c.BackoffGrace.String(), c.Seed,
	})
}

// UnmarshalJSON sets the fields present in b and leaves the others unchanged; unknown fields
// are an error so that a typo in a test's PUT does not pass silently.
func (c *Config) UnmarshalJSON(b []byte) error {
	var w configJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("decoding config: %w", err)
	}
	if dec.More() {
		return errors.New("decoding config: unexpected data after the JSON object")
	}
	set := func(dst *time.Duration, src *jsonDuration) {
		if src != nil {
			*dst = time.Duration(*src)
		}
	}
	set(&c.Latency, w.Latency)
	set(&c.Jitter, w.Jitter)
	set(&c.QuotaWindow, w.QuotaWindow)
	set(&c.StormFor, w.StormFor)
	set(&c.HangMax, w.HangMax)
	set(&c.BackoffGrace, w.BackoffGrace)
	if w.ErrorRates != nil {
		c.ErrorRates = w.ErrorRates
	}
	if w.QuotaLimit != nil {
		c.QuotaLimit = *w.QuotaLimit
	}
	if w.StormAfter != nil {
		c.StormAfter = *w.StormAfter
	}
	if w.Seed != nil {
		c.Seed = *w.Seed
	}
	return nil
}

// jsonDuration is a time.Duration written as a Go duration string.
type jsonDuration time.Duration

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30ms\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("parsing duration: %w", err)
	}
	*d = jsonDuration(v)
	return nil
}

// settings is the hot path's view of a normalized Config: the config plus the error rates
// looked up once instead of per request.
type settings struct {
	Config
	pUnavailable, pInternal, pQuota, pUnregistered float64
}

func newSettings(c Config) *settings {
	n := c.normalize()
	return &settings{
		Config:        n,
		pUnavailable:  n.ErrorRates[KindUnavailable],
		pInternal:     n.ErrorRates[KindInternal],
		pQuota:        n.ErrorRates[KindQuotaExceeded],
		pUnregistered: n.ErrorRates[KindUnregistered],
	}
}
