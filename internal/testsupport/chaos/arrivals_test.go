package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"pushfan/engagement"
)

// arrivals is an app's emulator's log as the checker needs it: each accepted
// send attributed to its broadcast and target by the event token it
// carries (data["pushfan"], signed by the replicas' key), the repeats of a
// target already accepted (duplicates, with their time, to be explained by
// a fault), and requests, acceptances and 429s per second. The emulator's
// own per-token tallies cannot tell one broadcast's send from another's.
type arrivals struct {
	keys atomic.Pointer[engagement.Keys]
	// app is the emulator's app: every request must come under its
	// project's path and carry one of its tokens (apps: all of the soak's,
	// to name the app a misrouted token belongs to).
	app  appSpec
	apps []appSpec

	inFlight atomic.Int64

	mu           sync.Mutex
	sent         map[uint64]map[uint64]int32 // broadcast → target → accepted sends
	dups         []dup
	secs         map[int64]*second
	unattributed int64
	// capped are the capped broadcasts' sends (marked by their title), per
	// broadcast and user: the first acceptance and the devices accepted.
	capped map[uint64]map[uint64]*userSends
	// counted are the arrival instants (Unix nanoseconds, in arrival
	// order within a few ms) of the requests the project's quota counts:
	// every send answered other than 429, as FCM counts them (its 4xx too).
	counted []int64
	// events are sampled event tokens of first acceptances, waiting to be
	// posted back as opens by the load generator.
	events  []string
	sampleN int64
	// misrouted are the requests that came under another project's path
	// or carried another app's token (the first few: the first stops the
	// run).
	misrouted []misroute
}

// misroute is a request an app's emulator should never have received.
type misroute struct {
	at        time.Time
	broadcast uint64 // 0 when its event token did not verify
	what      string
}

// userSends is what one user of a capped broadcast was sent.
type userSends struct {
	first   time.Time
	devices int
}

type dup struct {
	at                time.Time
	broadcast, target uint64
}

type second struct {
	requests, accepted, limited int64
	maxInFlight                 int64 // the most send requests being answered at once
}

func newArrivals(app appSpec, apps []appSpec) *arrivals {
	return &arrivals{app: app, apps: apps, sent: map[uint64]map[uint64]int32{}, secs: map[int64]*second{}, capped: map[uint64]map[uint64]*userSends{}}
}

// statusWriter remembers the status the emulator answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// wrap records every send request next reads.
func (a *arrivals) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sw := &statusWriter{ResponseWriter: w}
		arrived := time.Now()
		a.enter(arrived)
		next.ServeHTTP(sw, r)
		a.inFlight.Add(-1)
		a.record(arrived, time.Now(), sw.status, r.URL.Path, body)
	})
}

// enter counts a request in flight, and the second's high-water mark.
func (a *arrivals) enter(now time.Time) {
	n := a.inFlight.Add(1)
	a.mu.Lock()
	sec := a.second(now)
	sec.maxInFlight = max(sec.maxInFlight, n)
	a.mu.Unlock()
}

// second is now's bucket; a.mu is held.
func (a *arrivals) second(now time.Time) *second {
	sec := a.secs[now.Unix()]
	if sec == nil {
		sec = &second{}
		a.secs[now.Unix()] = sec
	}
	return sec
}

// maxInFlight is the most sends in flight at once in [from, to].
func (a *arrivals) maxInFlight(from, to time.Time) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var m int64
	for s := from.Unix(); s <= to.Unix(); s++ {
		if sec := a.secs[s]; sec != nil {
			m = max(m, sec.maxInFlight)
		}
	}
	return m
}

func (a *arrivals) record(arrived, now time.Time, status int, path string, body []byte) {
	var req struct {
		Message struct {
			Token        string            `json:"token"`
			Data         map[string]string `json:"data"`
			Notification struct {
				Title string `json:"title"`
			} `json:"notification"`
		} `json:"message"`
		ValidateOnly bool `json:"validate_only"`
	}
	_ = json.Unmarshal(body, &req) // the emulator judged it; a bad body was not accepted
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checkRoute(now, path, req.Message.Token, req.Message.Data["pushfan"])
	sec := a.second(now)
	sec.requests++
	switch {
	case status == http.StatusTooManyRequests:
		sec.limited++
		return
	}
	a.counted = append(a.counted, arrived.UnixNano())
	if status != http.StatusOK || req.ValidateOnly {
		return
	}
	sec.accepted++
	keys := a.keys.Load()
	tok := req.Message.Data["pushfan"]
	if keys == nil || tok == "" {
		a.unattributed++
		return
	}
	c, err := keys.Verify(tok, now)
	if err != nil {
		a.unattributed++
		return
	}
	m := a.sent[c.BroadcastID]
	if m == nil {
		m = map[uint64]int32{}
		a.sent[c.BroadcastID] = m
	}
	m[c.Target]++
	if m[c.Target] > 1 {
		a.dups = append(a.dups, dup{now, c.BroadcastID, c.Target})
		return
	}
	if req.Message.Notification.Title == cappedTitle {
		us := a.capped[c.BroadcastID]
		if us == nil {
			us = map[uint64]*userSends{}
			a.capped[c.BroadcastID] = us
		}
		u := us[c.UserID]
		if u == nil {
			u = &userSends{first: arrived}
			us[c.UserID] = u
		}
		u.devices++
	}
	// One first acceptance in 20 is opened by its app, up to a backlog of
	// 5,000 (the load posts them every two seconds).
	if a.sampleN++; a.sampleN%20 == 0 && len(a.events) < 5000 {
		a.events = append(a.events, tok)
	}
}

// checkRoute records a request that came under another project's path
// than the emulator's app's, or carried a token of another app (or of
// none): a token sent through the wrong project, which FCM would refuse
// or, worse, deliver to the wrong app. Every request counts, whatever
// its answer. a.mu is held.
func (a *arrivals) checkRoute(now time.Time, path, token, eventToken string) {
	var what string
	if want := "/v1/projects/" + a.app.project + "/messages:send"; path != want {
		what = fmt.Sprintf("a send to %s arrived at app %s's emulator (its path is %s)", path, a.app.name, want)
	} else if owner := tokenApp(a.apps, token); owner != a.app.name {
		what = fmt.Sprintf("token %q (app %q) was sent through app %s's project %s", token, owner, a.app.name, a.app.project)
	}
	if what == "" || len(a.misrouted) >= 10 {
		return
	}
	var id uint64
	if keys := a.keys.Load(); keys != nil {
		if c, err := keys.Verify(eventToken, now); err == nil {
			id = c.BroadcastID
		}
	}
	a.misrouted = append(a.misrouted, misroute{now, id, what})
}

// misroutes returns the misrouted requests recorded from index i on, and
// the next index.
func (a *arrivals) misroutes(i int) ([]misroute, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]misroute(nil), a.misrouted[i:]...), len(a.misrouted)
}

// broadcasts are the broadcasts this emulator accepted sends of.
func (a *arrivals) broadcasts() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]uint64, 0, len(a.sent))
	for id := range a.sent {
		out = append(out, id)
	}
	return out
}

// takeEvents returns up to n sampled event tokens and forgets them.
func (a *arrivals) takeEvents(n int) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	n = min(n, len(a.events))
	out := append([]string(nil), a.events[:n]...)
	a.events = a.events[n:]
	return out
}

// distinct is the number of targets of broadcast id the emulator accepted.
func (a *arrivals) distinct(id uint64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int64(len(a.sent[id]))
}

// dupsSince returns the duplicates recorded from index i on, and the next
// index.
func (a *arrivals) dupsSince(i int) ([]dup, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]dup(nil), a.dups[i:]...), len(a.dups)
}

// totals sums the seconds in [from, to).
func (a *arrivals) totals(from, to time.Time, skip func(time.Time) bool) second {
	a.mu.Lock()
	defer a.mu.Unlock()
	var t second
	for s, c := range a.secs {
		at := time.Unix(s, 0)
		if at.Before(from) || !at.Before(to) || (skip != nil && skip(at)) {
			continue
		}
		t.requests += c.requests
		t.accepted += c.accepted
		t.limited += c.limited
	}
	return t
}

// accounted is every accepted send the log attributed: the distinct
// targets of every broadcast plus the repeats, plus the unattributed.
func (a *arrivals) accounted() (distinct, repeats, unattributed int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.sent {
		distinct += int64(len(m))
	}
	return distinct, int64(len(a.dups)), a.unattributed
}

func (a *arrivals) unattributedSends() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.unattributed
}

// busiestWindow is the most requests the quota counts that arrived within
// any span of length w (a sliding window, not the emulator's fixed one),
// and where that span starts.
func (a *arrivals) busiestWindow(w time.Duration) (n int, from time.Time) {
	a.mu.Lock()
	ts := slices.Clone(a.counted)
	a.mu.Unlock()
	// Recorded when answered: arrival order is off by up to a latency.
	slices.Sort(ts)
	lo := 0
	for hi, t := range ts {
		for t-ts[lo] >= int64(w) {
			lo++
		}
		if hi-lo+1 > n {
			n, from = hi-lo+1, time.Unix(0, ts[lo])
		}
	}
	return n, from
}

// overQuota is the window of length w whose requests most exceed what
// allowed says its start may hold (quotaAllowance). ok is false when none
// exceeds it. Only windows over base, the least any window may hold, ask
// allowed.
func (a *arrivals) overQuota(w time.Duration, base int, allowed func(from time.Time) int) (n, limit int, from time.Time, ok bool) {
	a.mu.Lock()
	ts := slices.Clone(a.counted)
	a.mu.Unlock()
	slices.Sort(ts)
	lo, limitAt, at := 0, -1, 0
	worst := 0
	for hi, t := range ts {
		for t-ts[lo] >= int64(w) {
			lo++
		}
		k := hi - lo + 1
		if k <= base {
			continue
		}
		if limitAt != lo {
			limitAt, at = lo, allowed(time.Unix(0, ts[lo]))
		}
		if k-at > worst {
			worst, n, limit, from, ok = k-at, k, at, time.Unix(0, ts[lo]), true
		}
	}
	return n, limit, from, ok
}

// cappedSends returns a copy of the capped broadcasts' sends.
func (a *arrivals) cappedSends() map[uint64]map[uint64]userSends {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[uint64]map[uint64]userSends, len(a.capped))
	for id, us := range a.capped {
		m := make(map[uint64]userSends, len(us))
		for u, x := range us {
			m[u] = *x
		}
		out[id] = m
	}
	return out
}
