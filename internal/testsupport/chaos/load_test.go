package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// load keeps the mix going and remembers what the checker needs from it:
// what it submitted by kind, the local-time broadcasts (not due at once),
// the transactional sends' times, and the opens the API took.
type load struct {
	s   *stack
	run *run
	hc  *http.Client

	mu        sync.Mutex
	submitted map[string]int // by kind
	refused   map[string]int // 4xx answers by kind (a resend with nothing to resend)
	local     map[uint64]time.Time
	chores    []chore
	txn       []txnSend
	opened    map[uint64]map[uint64]bool // broadcast → targets whose open was answered 200
	events    int
}

// chore is a cancel or a release due at a moment.
type chore struct {
	at     time.Time
	id     uint64
	action string // "cancel" or "release"
}

type txnSend struct {
	app  string
	at   time.Time
	took time.Duration
	ok   bool
}

// generator is one kind of load: every between lo and hi, step runs.
// A bulk one stops quietTail before the end of the run, so that the drain
// is the backlog of the faults, not of the last minute's submits (the
// short run in CI has four minutes in all).
type generator struct {
	kind   string
	lo, hi time.Duration
	bulk   bool
	step   func(l *load, ctx context.Context, rng *rand.Rand) error
}

const quietTail = 45 * time.Second

var generators = []generator{
	{"bulk all", 20 * time.Second, 40 * time.Second, true, (*load).bulk},
	{"named audience", 20 * time.Second, 40 * time.Second, true, (*load).named},
	{"capped", 15 * time.Second, 30 * time.Second, true, (*load).capped},
	{"paced", 40 * time.Second, 70 * time.Second, true, (*load).paced},
	{"local time", 30 * time.Second, 80 * time.Second, true, (*load).localTime},
	{"held", 30 * time.Second, 70 * time.Second, true, (*load).held},
	{"resend", 40 * time.Second, 80 * time.Second, true, (*load).resend},
	{"transactional", time.Second, time.Second, false, (*load).transactional},
	{"engagement", 2 * time.Second, 2 * time.Second, false, (*load).engagement},
	{"chores", 500 * time.Millisecond, 500 * time.Millisecond, false, (*load).doChores},
	// The partner app's load, after the default app's: each generator's
	// random stream is seeded by its index, so the default app's load
	// keeps the choices it had before there was a partner.
	{"partner bulk all", 30 * time.Second, 60 * time.Second, true, (*load).partnerBulk},
	{"partner transactional", 2 * time.Second, 5 * time.Second, false, (*load).partnerTransactional},
}

func newLoad(s *stack, r *run) *load {
	return &load{s: s, run: r, hc: &http.Client{Timeout: 10 * time.Second},
		submitted: map[string]int{}, refused: map[string]int{}, local: map[uint64]time.Time{}, opened: map[uint64]map[uint64]bool{}}
}

// start runs every generator until ctx is done.
func (l *load) start(ctx context.Context, wg *sync.WaitGroup) {
	for i, g := range generators {
		rng := rand.New(rand.NewPCG(uint64(l.s.cfg.seed), uint64(100+i)))
		quiet := l.run.t0.Add(l.s.cfg.duration - quietTail)
		wg.Go(func() {
			for {
				if g.bulk && time.Now().After(quiet) {
					return
				}
				if err := g.step(l, ctx, rng); err != nil {
					if err != errStopped {
						l.run.violate(0, fmt.Sprintf("load %s: %v", g.kind, err))
					}
					return
				}
				if err := sleep(ctx, between(rng, g.lo, g.hi)); err != nil {
					return
				}
			}
		})
	}
}

// submit posts a broadcast (or a resend to path) without waiting for it,
// retried on another replica under one Idempotency-Key.
func (l *load) submit(ctx context.Context, rng *rand.Rand, kind, path string, body any) (uint64, error) {
	key := fmt.Sprintf("chaos-%d-%x", l.s.cfg.seed, rng.Uint64())
	status, raw, err := l.s.callAny(ctx, l.hc, "POST", path, key, body, time.Minute)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if status >= 400 {
		l.refused[kind]++
		if kind != "resend" {
			return 0, fmt.Errorf("POST %s: %d %s", path, status, raw)
		}
		return 0, nil
	}
	var b broadcastAnswer
	if err := json.Unmarshal(raw, &b); err != nil {
		return 0, fmt.Errorf("decoding the answer to POST %s: %w", path, err)
	}
	l.submitted[kind]++
	return b.ID, nil
}

func (l *load) later(at time.Time, id uint64, action string) {
	l.mu.Lock()
	l.chores = append(l.chores, chore{at, id, action})
	l.mu.Unlock()
}

func (l *load) bulk(ctx context.Context, rng *rand.Rand) error {
	id, err := l.submit(ctx, rng, "bulk all", "/push/broadcast?wait=0", map[string]any{"app": defaultApp, "title": "bulk", "body": "to everyone", "audience": map[string]any{"all": true}})
	if err != nil {
		return err
	}
	// A quarter are canceled at a random moment: queued, planning,
	// mid-send or just finished.
	if rng.IntN(4) == 0 {
		l.later(time.Now().Add(between(rng, 0, 15*time.Second)), id, "cancel")
	}
	return nil
}

func zoneAudience(zone string) map[string]any {
	return map[string]any{"name": "zone_users", "params": map[string]any{"zone": zone}}
}

func (l *load) named(ctx context.Context, rng *rand.Rand) error {
	_, err := l.submit(ctx, rng, "named audience", "/push/broadcast?wait=0", map[string]any{"app": defaultApp, "title": "named", "audience": zoneAudience("UTC")})
	return err
}

// capped sends to the capped_users audience (the users of UTC, under the
// chaos cap) often enough that most of its broadcasts find most users
// capped; a quarter are canceled, as bulk broadcasts are.
func (l *load) capped(ctx context.Context, rng *rand.Rand) error {
	id, err := l.submit(ctx, rng, "capped", "/push/broadcast?wait=0", map[string]any{"app": defaultApp, "title": cappedTitle, "audience": map[string]any{"name": "capped_users"}})
	if err != nil {
		return err
	}
	if rng.IntN(4) == 0 {
		l.later(time.Now().Add(between(rng, 0, 15*time.Second)), id, "cancel")
	}
	return nil
}

func (l *load) paced(ctx context.Context, rng *rand.Rand) error {
	_, err := l.submit(ctx, rng, "paced", "/push/broadcast?wait=0", map[string]any{"app": defaultApp, "title": "paced", "audience": zoneAudience("Asia/Tokyo"), "max_rate": 200})
	return err
}

// localTime sends to 300 users of Tokyo and Kathmandu at Kathmandu's wall
// clock 40 s from now: Tokyo's share is due at once, Kathmandu's in 40 s.
func (l *load) localTime(ctx context.Context, rng *rand.Rand) error {
	ktm, err := time.LoadLocation("Asia/Kathmandu")
	if err != nil {
		return fmt.Errorf("loading Asia/Kathmandu: %w", err)
	}
	ids := make([]uint64, 0, 300)
	for len(ids) < 300 {
		uid := uint64(1 + rng.IntN(l.s.cfg.users))
		if z := uid % uint64(len(zones)); z == 0 || z == 1 {
			ids = append(ids, uid)
		}
	}
	due := time.Now().Add(40 * time.Second)
	id, err := l.submit(ctx, rng, "local time", "/push/broadcast?wait=0", map[string]any{
		"app": defaultApp, "title": "local", "audience": map[string]any{"user_ids": ids}, "class": "bulk",
		"send_at_local": due.In(ktm).Format("2006-01-02T15:04:05")})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.local[id] = due
	l.mu.Unlock()
	return nil
}

func (l *load) held(ctx context.Context, rng *rand.Rand) error {
	id, err := l.submit(ctx, rng, "held then released", "/push/broadcast?wait=0", map[string]any{"app": defaultApp, "title": "held", "audience": zoneAudience("America/New_York"), "hold": true})
	if err != nil {
		return err
	}
	l.later(time.Now().Add(between(rng, 3*time.Second, 15*time.Second)), id, "release")
	return nil
}

// resend re-sends the failures of a random completed broadcast (of
// either app: a resend goes to its broadcast's app).
func (l *load) resend(ctx context.Context, rng *rand.Rand) error {
	var ids []uint64
	if err := l.s.db.Select(&ids, "SELECT id FROM broadcasts WHERE status = 'completed' AND failed > 0 ORDER BY id DESC LIMIT 10"); err != nil {
		if l.s.dbRestarting(time.Now()) {
			return nil // no resend this round
		}
		return fmt.Errorf("finding a broadcast to resend: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := l.submit(ctx, rng, "resend", fmt.Sprintf("/push/broadcasts/%d/resend?wait=0", ids[rng.IntN(len(ids))]), map[string]any{})
	return err
}

// engagement posts opens for event tokens the emulators received, each
// batch until a replica answers it 200 (a replay counts once).
func (l *load) engagement(ctx context.Context, _ *rand.Rand) error {
	// 50 of the default app's, as in the single-app soak, and up to 25 of
	// the partner's: one post holds at most 100.
	toks := l.s.emus[0].arr.takeEvents(50)
	for _, e := range l.s.emus[1:] {
		toks = append(toks, e.arr.takeEvents(25)...)
	}
	if len(toks) == 0 {
		return nil
	}
	evs := make([]map[string]string, len(toks))
	for i, t := range toks {
		evs[i] = map[string]string{"token": t, "type": "opened"}
	}
	status, raw, err := l.s.callAny(ctx, l.hc, "POST", "/v1/events", "", map[string]any{"events": evs}, time.Minute)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("POST /v1/events: %d %s", status, raw)
	}
	keys := l.s.emus[0].arr.keys.Load()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range toks {
		c, err := keys.Verify(t, time.Now())
		if err != nil {
			return fmt.Errorf("an event token the emulator received does not verify: %w", err)
		}
		if l.opened[c.BroadcastID] == nil {
			l.opened[c.BroadcastID] = map[uint64]bool{}
		}
		l.opened[c.BroadcastID][c.Target] = true
	}
	l.events += len(toks)
	return nil
}

// doChores runs the cancels and releases that are due.
func (l *load) doChores(ctx context.Context, _ *rand.Rand) error {
	l.mu.Lock()
	var due, rest []chore
	for _, c := range l.chores {
		if time.Now().After(c.at) {
			due = append(due, c)
		} else {
			rest = append(rest, c)
		}
	}
	l.chores = rest
	l.mu.Unlock()
	for _, c := range due {
		if err := l.chore(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

func (l *load) chore(ctx context.Context, c chore) error {
	status, raw, err := l.s.callAny(ctx, l.hc, "POST", fmt.Sprintf("/push/broadcasts/%d/%s", c.id, c.action), "", nil, time.Minute)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if status >= 400 {
		// A cancel of a broadcast already final is refused, as it should be.
		l.refused[c.action]++
		// A release retried after its answer was lost is refused the second
		// time; only a broadcast still held is a failed release.
		var st string
		if c.action == "release" {
			err := l.s.db.QueryRow("SELECT status FROM broadcasts WHERE id = ?", c.id).Scan(&st)
			switch {
			case err != nil && l.s.dbRestarting(time.Now()):
				l.chores = append(l.chores, chore{at: time.Now().Add(2 * time.Second), id: c.id, action: c.action})
			case err != nil || st == "held":
				return fmt.Errorf("POST /push/broadcasts/%d/release: %d %s, and it is still held", c.id, status, raw)
			}
		}
		return nil
	}
	l.submitted[c.action]++
	return nil
}

// flushChores runs every chore still waiting (the releases above all), for
// the drain.
func (l *load) flushChores(ctx context.Context) error {
	l.mu.Lock()
	cs := l.chores
	l.chores = nil
	l.mu.Unlock()
	for _, c := range cs {
		if err := l.chore(ctx, c); err != nil {
			return err
		}
	}
	return nil
}
