package fcmemu

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Emulator is an FCM HTTP v1 endpoint in memory. It is safe for concurrent use; one Emulator can
// back several servers.
type Emulator struct {
	log   *slog.Logger
	epoch time.Time // origin of the monotonic instants used on the hot path

	// cfg is an immutable snapshot swapped whole, so the hot path reads it with one atomic
	// load. cfgMu only serialises writers (SetConfig, PUT, Reset) with each other.
	cfg   atomic.Pointer[settings]
	cfgMu sync.Mutex

	storm   atomic.Pointer[stormState]
	quota   quotaState
	backoff projectBackoff
	tokens  *tokenTable
	stats   statsCounters
	rec     recorder
	devs    devices

	msgSeq   atomic.Uint64 // message ids
	reqSeq   atomic.Uint64 // randomness for token-less sends
	instance string        // suffix making message ids unique across emulators

	bodies         [numCodes][]byte // static error bodies, rendered once
	quotaBodyCache atomic.Pointer[quotaBody]
	bufPool        sync.Pool // *bytes.Buffer for request bodies
	handler        http.Handler
}

// New returns an Emulator with cfg (defaults applied; see Config) logging to log (nil discards).
// An invalid cfg is a programming error, so New panics on it, naming the field; callers holding
// untrusted input (flags, JSON) check Config.Validate first, as Main does.
func New(cfg Config, log *slog.Logger) *Emulator {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("fcmemu.New: invalid config: %v", err))
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := time.Now()
	e := &Emulator{
		log:      log,
		epoch:    now,
		tokens:   newTokenTable(),
		instance: strconv.FormatUint(splitmix64(uint64(now.UnixNano())^uint64(cfg.Seed)), 16),
	}
	e.bufPool.New = func() any { return new(bytes.Buffer) }
	for c := code(0); c < numCodes; c++ {
		if c != codeOK && c != codeRateLimitExceeded && c != codeCanceled {
			e.bodies[c] = errorBody(c)
		}
	}
	// An invalid-argument answer without a known rule is never sent; the generic body is there
	// for flaky<K>xinvalid tokens, which fail as a token cause.
	e.bodies[codeInvalidArgument] = invalidArgumentBody(fieldToken, msgInvalidToken)
	st := newSettings(cfg)
	e.cfg.Store(st)
	e.storm.Store(newStorm(&st.Config, 0))
	e.stats.startedAt.Store(now.UnixNano())
	e.handler = e.routes()
	return e
}

// now is the current instant on the monotonic clock, as nanoseconds since the epoch.
func (e *Emulator) now() int64 { return int64(time.Since(e.epoch)) }

// wall converts an instant back to wall-clock time for display.
func (e *Emulator) wall(t int64) time.Time { return e.epoch.Add(time.Duration(t)) }

// Config returns the current configuration, defaults applied.
func (e *Emulator) Config() Config {
	c := e.cfg.Load().Config
	c.ErrorRates = maps.Clone(c.ErrorRates)
	return c
}

// SetConfig replaces the configuration. A change of StormAfter or StormFor re-arms the storm
// (counting accepted sends from now); a change of QuotaLimit or QuotaWindow starts a new quota
// window at the next request.
func (e *Emulator) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	e.storeConfigLocked(cfg)
	return nil
}

// storeConfigLocked installs a validated cfg; the caller holds cfgMu.
func (e *Emulator) storeConfigLocked(cfg Config) {
	old := e.cfg.Load()
	st := newSettings(cfg)
	e.cfg.Store(st)
	n := &st.Config
	if n.StormAfter != old.StormAfter || n.StormFor != old.StormFor {
		e.storm.Store(newStorm(n, e.stats.accepted.Load()))
	}
	if n.QuotaLimit != old.QuotaLimit || n.QuotaWindow != old.QuotaWindow {
		e.quota.reset()
	}
	e.log.Info("fcmemu config changed", "latency", n.Latency, "jitter", n.Jitter,
		"error_rates", n.ErrorRates, "quota_limit", n.QuotaLimit, "quota_window", n.QuotaWindow,
		"storm_after", n.StormAfter, "storm_for", n.StormFor)
}

// Reset clears per-token counts, totals, the quota window, announced back-off windows, and
// re-arms the storm. The configuration is kept.
func (e *Emulator) Reset() {
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	e.tokens.reset()
	e.rec.reset()
	e.devs.reset()
	e.stats.reset(time.Now())
	e.quota.reset()
	e.backoff.w.Store(nil)
	e.storm.Store(newStorm(&e.cfg.Load().Config, 0))
	e.log.Info("fcmemu reset")
}

// Counts returns what the emulator saw for token (zeros if never seen).
func (e *Emulator) Counts(token string) TokenCounts { return e.tokens.lookup(token) }

// Stats returns the current totals.
func (e *Emulator) Stats() Stats {
	s := &e.stats
	out := Stats{
		StartedAt:                    time.Unix(0, s.startedAt.Load()),
		Requests:                     s.requests.Load(),
		Accepted:                     s.accepted.Load(),
		Validated:                    s.validated.Load(),
		ByCode:                       make(map[string]int64),
		Tokens:                       e.tokens.distinct.Load(),
		InFlight:                     s.inFlight.Load(),
		MaxInFlight:                  s.maxInFlight.Load(),
		ConnectionsAccepted:          s.connsAccepted.Load(),
		ConnectionsOpen:              s.connsOpen.Load(),
		RequestsDuringBackoff:        s.duringBackoff.Load(),
		RequestsDuringProjectBackoff: s.duringProject.Load(),
		RequestsDuringTokenBackoff:   s.duringToken.Load(),
		CPUSeconds:                   processCPUSeconds(),
	}
	for c := code(0); c < numCodes; c++ {
		if n := s.byCode[c].Load(); n > 0 {
			out.ByCode[c.spec().name] = n
		}
	}
	if start, end, ok := e.storm.Load().window(); ok {
		st, en := e.wall(start), e.wall(end)
		out.StormStartedAt, out.StormEndsAt = &st, &en
	}
	return out
}

// Handler returns the HTTP handler serving the FCM and /emulator routes.
func (e *Emulator) Handler() http.Handler { return e.handler }
