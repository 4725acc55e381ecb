package chaos

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"pushfan/fcmemu"
)

// appSpec is one app (Firebase project) of the soak: the replicas' YAML
// names it in apps:, and it has an emulator of its own whose quota is its
// rate limit over the quota window (docs/apps.md).
type appSpec struct {
	name, project string
	rate          float64 // messages a second: rate_limit, and its emulator's quota
	// prefixes are how the seed's tokens of this app begin: a request
	// carrying another app's token was sent through the wrong project.
	prefixes []string
}

// The soak's apps. The first is the one every existing token, audience and
// job belongs to (it keeps the name and project of the single-app soak);
// the second has its own users and tokens in the same device_tokens table
// (seedPartner).
const (
	defaultApp = "default"
	partnerApp = "partner"
)

func soakApps() []appSpec {
	return []appSpec{
		{name: defaultApp, project: "chaos", rate: 1500, prefixes: []string{"c-", "c2-", "unregistered-c-"}},
		{name: partnerApp, project: "chaos-partner", rate: 500, prefixes: []string{"p-", "p2-", "unregistered-p-"}},
	}
}

// tokenApp is the app the seed made tok for ("" for none of them).
func tokenApp(apps []appSpec, tok string) string {
	for _, a := range apps {
		for _, p := range a.prefixes {
			if strings.HasPrefix(tok, p) {
				return a.name
			}
		}
	}
	return ""
}

// emulator is one app's FCM emulator: its own httptest server, its own
// quota (the app's rate limit times the quota window) and its own
// arrivals log.
type emulator struct {
	app appSpec
	emu *fcmemu.Emulator
	arr *arrivals
	url string // the FCM endpoint the app's YAML entry names (…/v1)
	// mu serializes read-modify-write changes of the emulator's config,
	// so that overlapping faults (a storm during a latency spike) each
	// undo only their own field.
	mu sync.Mutex
}

// target is the emulator's name in the fault log.
func (e *emulator) target() string { return "emu:" + e.app.name }

func newEmulator(t *testing.T, cfg runConfig, app appSpec, seed int64) *emulator {
	t.Helper()
	e := &emulator{app: app, arr: newArrivals(app, cfg.apps)}
	e.emu = fcmemu.New(fcmemu.Config{
		Latency: baseLatency, Jitter: baseJitter,
		QuotaLimit: quotaOf(cfg, app), QuotaWindow: cfg.quotaWindow,
		Seed: seed,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(e.arr.wrap(e.emu.Handler()))
	t.Cleanup(srv.Close)
	e.url = srv.URL + "/v1"
	return e
}

// set changes the emulator's config under its lock.
func (e *emulator) set(change func(*fcmemu.Config)) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.emu.Config()
	change(&c)
	if err := e.emu.SetConfig(c); err != nil {
		return fmt.Errorf("%s config: %w", e.target(), err)
	}
	return nil
}

// quotaOf is app's quota per window: what its emulator allows, and its
// rate limit times the window.
func quotaOf(cfg runConfig, app appSpec) int { return int(app.rate * cfg.quotaWindow.Seconds()) }

// quotaWithSlack is the most requests any sliding window of the quota's
// length may hold at app's emulator (docs/reliability-soak.md, "The quota
// holds"): the limiter keeps every window to the quota (docs/scale-out.md,
// "The window"), and arrival instants are the emulator's, a send's network
// time after the replica's permit: 1 % of the quota covers them.
func quotaWithSlack(cfg runConfig, app appSpec) int {
	return quotaOf(cfg, app) + quotaOf(cfg, app)/100
}

// quotaAllowance is what the window of app's arrivals from `from` may
// hold: the quota with its slack, and the app's rate times the lead the
// checker's own stall gives the window's start (see stallProbe), which is
// returned too.
func quotaAllowance(cfg runConfig, app appSpec, probe *stallProbe, from time.Time) (int, time.Duration) {
	lead := probe.lead(from, cfg.quotaWindow)
	return quotaWithSlack(cfg, app) + int(app.rate*lead.Seconds()), lead
}

// totalRate is every app's rate limit together: what the cluster may send
// at once, which bounds the sends a replica loses in 150 ms.
func (c runConfig) totalRate() float64 {
	var r float64
	for _, a := range c.apps {
		r += a.rate
	}
	return r
}

// The sums over both emulators the checker needs.

// distinct is the number of targets of broadcast id accepted, over every
// emulator (a broadcast's sends all go to its app's), and the apps whose
// emulators accepted any.
func (s *stack) distinct(id uint64) (int64, []string) {
	var n int64
	var apps []string
	for _, e := range s.emus {
		if d := e.arr.distinct(id); d > 0 {
			n += d
			apps = append(apps, e.app.name)
		}
	}
	return n, apps
}

// maxInFlight is the most sends in flight in [from, to], summed over the
// emulators (each one's most: an over-estimate of the sends at once).
func (s *stack) maxInFlight(from, to time.Time) int64 {
	var n int64
	for _, e := range s.emus {
		n += e.arr.maxInFlight(from, to)
	}
	return n
}

// accepted is the emulators' accepted sends together.
func (s *stack) accepted() (n int64) {
	for _, e := range s.emus {
		n += e.emu.Stats().Accepted
	}
	return n
}

// requests is the send requests the emulators answered together.
func (s *stack) requests() (n int64) {
	for _, e := range s.emus {
		n += e.emu.Stats().Requests
	}
	return n
}

// cappedSends are the capped broadcasts' sends, from every emulator (the
// capped audience is the default app's: another's would be misrouted).
func (s *stack) cappedSends() map[uint64]map[uint64]userSends {
	out := map[uint64]map[uint64]userSends{}
	for _, e := range s.emus {
		for id, us := range e.arr.cappedSends() {
			out[id] = us
		}
	}
	return out
}
