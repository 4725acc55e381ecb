package fcmemu

import (
	"sync/atomic"
	"time"
)

// Stats is the emulator's totals since it started or was last reset (GET /emulator/stats).
type Stats struct {
	// StartedAt is when counting started (New or the last Reset).
	StartedAt time.Time `json:"started_at"`
	// Requests counts send requests received, whatever the answer.
	Requests int64 `json:"requests"`
	// Accepted counts 2xx answers to real sends; Validated to validate_only sends.
	Accepted  int64 `json:"accepted"`
	Validated int64 `json:"validated"`
	// ByCode counts send answers by code: "OK", the FcmError codes (UNREGISTERED, ...),
	// "RATE_LIMIT_EXCEEDED" for project-quota 429s, and "CANCELED" for requests whose client
	// went away before the answer. Codes never given are absent.
	ByCode map[string]int64 `json:"by_code"`
	// Tokens is the number of distinct tokens seen.
	Tokens int64 `json:"tokens"`
	// InFlight is the number of send requests being handled now; MaxInFlight the highest it has
	// been, i.e. the client's effective concurrency.
	InFlight    int64 `json:"in_flight"`
	MaxInFlight int64 `json:"max_in_flight"`
	// ConnectionsAccepted counts connections accepted by servers made with NewServer/Serve (or
	// any server whose ConnState is Emulator.ConnState); ConnectionsOpen is a gauge and
	// survives Reset.
	ConnectionsAccepted int64 `json:"connections_accepted"`
	ConnectionsOpen     int64 `json:"connections_open"`
	// RequestsDuringBackoff counts requests that arrived when a 429 already sent told clients to
	// stay away (see "Quota, storms and Retry-After" in the package doc); split into project
	// 429s (quota, storm) and per-token 429s (a request can count in both, once in the total).
	// A client that honours Retry-After leaves it at 0.
	RequestsDuringBackoff        int64 `json:"requests_during_backoff"`
	RequestsDuringProjectBackoff int64 `json:"requests_during_project_backoff"`
	RequestsDuringTokenBackoff   int64 `json:"requests_during_token_backoff"`
	// StormStartedAt and StormEndsAt describe the current arming's storm once it has started.
	StormStartedAt *time.Time `json:"storm_started_at,omitempty"`
	StormEndsAt    *time.Time `json:"storm_ends_at,omitempty"`
	// CPUSeconds is the user+system CPU time of the whole process (0 where unsupported); it
	// lets a benchmark subtract what the emulator cost.
	CPUSeconds float64 `json:"cpu_seconds"`
}

// statsCounters are the live totals, all atomics: every send touches them.
type statsCounters struct {
	startedAt     atomic.Int64 // unix nanos (wall clock, for display)
	requests      atomic.Int64
	accepted      atomic.Int64
	validated     atomic.Int64
	byCode        [numCodes]atomic.Int64
	inFlight      atomic.Int64 // gauge
	maxInFlight   atomic.Int64
	connsAccepted atomic.Int64
	connsOpen     atomic.Int64 // gauge
	duringBackoff atomic.Int64
	duringProject atomic.Int64
	duringToken   atomic.Int64
}

// reset zeroes the counters but not the gauges, which describe the present.
func (s *statsCounters) reset(now time.Time) {
	s.startedAt.Store(now.UnixNano())
	for _, c := range []*atomic.Int64{&s.requests, &s.accepted, &s.validated, &s.connsAccepted,
		&s.duringBackoff, &s.duringProject, &s.duringToken} {
		c.Store(0)
	}
	for i := range s.byCode {
		s.byCode[i].Store(0)
	}
	s.maxInFlight.Store(s.inFlight.Load())
}

// enter counts a request in flight and keeps the high-water mark.
func (s *statsCounters) enter() {
	n := s.inFlight.Add(1)
	for {
		m := s.maxInFlight.Load()
		if n <= m || s.maxInFlight.CompareAndSwap(m, n) {
			return
		}
	}
}

func (s *statsCounters) leave() { s.inFlight.Add(-1) }
