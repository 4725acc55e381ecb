package engagement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"pushfan/internal/platform/lifecycle"
	"pushfan/model"
)

// MaxEvents is the most events one POST /v1/events may carry.
const MaxEvents = 100

// maxGroup bounds the events of one group commit.
const maxGroup = 2000

// CodeUnknownBroadcast: the token is genuine but its broadcast is gone
// (deleted by retention).
const CodeUnknownBroadcast = "unknown_broadcast"

// ErrStopping: the instance is stopping and stores no more events (the app
// retries them, here or on another instance).
var ErrStopping = errors.New("engagement: the instance is stopping")

// Store is where events are stored (repository.Store).
type Store interface {
	StoreEvents(ctx context.Context, evs []model.EngagementEvent) ([]model.EventResult, error)
}

// RawEvent is one event as the app posts it.
type RawEvent struct {
	Token string
	Type  string
	At    string // RFC 3339; empty: when it arrives
}

// Refusal is one refused event of a post: its index and why.
type Refusal struct {
	Index int
	Code  string
}

// Answer is what a post of events did.
type Answer struct {
	Accepted, Duplicates int
	Refused              []Refusal
}

// Ingester verifies posted events and stores them by group commit: every
// post waits until its events are committed (an answer is a promise that
// they are counted), and one writer commits the events of every post
// waiting meanwhile in one transaction, so the database sees a
// transaction per commit time rather than one per event.
type Ingester struct {
	// OnCommitted, when set before Start, is told each group commit's
	// events stored and those already stored (metrics).
	OnCommitted func(stored, duplicates int)

	store   Store
	keys    *Keys
	log     *slog.Logger
	now     func() time.Time
	timeout time.Duration

	queue chan *post
	loop  lifecycle.Loop
	// stopping is closed when the writer ends; mu is held shared by every
	// post being queued, so that the writer, taking it once after closing
	// stopping, knows that every post queued is in the queue.
	stopping chan struct{}
	mu       sync.RWMutex
	started  bool      // under mu: the writer runs (or ran)
	stopOnce sync.Once // closes stopping
}

type post struct {
	evs  []model.EngagementEvent
	res  []model.EventResult
	err  error
	done chan struct{}
}

// NewIngester builds an Ingester; dbTimeout bounds a group commit.
func NewIngester(store Store, keys *Keys, log *slog.Logger, dbTimeout time.Duration) *Ingester {
	return &Ingester{store: store, keys: keys, log: log, now: time.Now, timeout: dbTimeout,
		queue: make(chan *post, 256), stopping: make(chan struct{})}
}

// Start starts the writer. Until it has, posts are refused (ErrStopping):
// nobody would commit them.
func (g *Ingester) Start(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.started = g.loop.Start(ctx, g.write) || g.started
}

// Stop stops taking posts, commits those queued, and waits for the writer.
func (g *Ingester) Stop(ctx context.Context) error {
	err := g.loop.Stop(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.started {
		g.stopOnce.Do(func() { close(g.stopping) }) // never started: refuse posts from now on
	}
	return err
}

// Ingest verifies raw and stores the genuine events, and answers when they
// are committed. A click also counts an open (one the answer does not
// report). A test send's events are accepted and never counted.
func (g *Ingester) Ingest(ctx context.Context, raw []RawEvent) (Answer, error) {
	var a Answer
	now := g.now()
	p := &post{done: make(chan struct{})}
	var owner []int // p.evs[i] answers raw[owner[i]]; -1: the implied open
	for i, r := range raw {
		e, test, code := g.verify(r, now)
		switch {
		case code != "":
			a.Refused = append(a.Refused, Refusal{Index: i, Code: code})
			continue
		case test:
			a.Accepted++
			continue
		}
		p.evs = append(p.evs, e)
		owner = append(owner, i)
		if e.Type == model.EventClicked {
			open := e
			open.Type = model.EventOpened
			p.evs = append(p.evs, open)
			owner = append(owner, -1)
		}
	}
	if len(p.evs) == 0 {
		return a, nil
	}
	if err := g.enqueue(ctx, p); err != nil {
		return Answer{}, err
	}
	// Once queued the post is committed or failed by the writer, whatever
	// ctx does: the answer must say what happened.
	<-p.done
	if p.err != nil {
		return Answer{}, p.err
	}
	for i, res := range p.res {
		if owner[i] < 0 {
			continue
		}
		switch res {
		case model.EventStored:
			a.Accepted++
		case model.EventDuplicate:
			a.Duplicates++
		case model.EventUnknownBroadcast:
			a.Refused = append(a.Refused, Refusal{Index: owner[i], Code: CodeUnknownBroadcast})
		}
	}
	sortRefusals(a.Refused)
	return a, nil
}

// Verify returns what a genuine token says, expired or not (a click on an
// old notification still leads to its link).
func (g *Ingester) Verify(tok string) (Claims, error) {
	c, err := g.keys.Verify(tok, g.now())
	var r *Refused
	if errors.As(err, &r) && r.Code == CodeExpired {
		return c, nil
	}
	return c, err
}

// enqueue hands p to the writer.
func (g *Ingester) enqueue(ctx context.Context, p *post) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.started {
		return ErrStopping
	}
	select {
	case <-g.stopping:
		return ErrStopping
	default:
	}
	select {
	case g.queue <- p:
		return nil
	case <-g.stopping:
		return ErrStopping
	case <-ctx.Done():
		return fmt.Errorf("engagement: queueing events: %w", ctx.Err())
	}
}

func sortRefusals(rs []Refusal) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].Index < rs[j-1].Index; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// verify checks one event: its token, type and time.
func (g *Ingester) verify(r RawEvent, now time.Time) (e model.EngagementEvent, test bool, code string) {
	c, err := g.keys.Verify(r.Token, now)
	var ref *Refused
	if errors.As(err, &ref) {
		return e, false, ref.Code
	}
	typ, ok := model.ParseEventType(r.Type)
	if !ok {
		return e, false, CodeUnknownType
	}
	at := now
	if r.At != "" {
		t, err := time.Parse(time.RFC3339Nano, r.At)
		if err != nil {
			return e, false, CodeBadTime
		}
		// A device's clock is not to be trusted beyond what the token
		// proves: the event is after the send and not in the future.
		switch at = t; {
		case at.Before(c.Sent):
			at = c.Sent
		case at.After(now):
			at = now
		}
	}
	return model.EngagementEvent{
		BroadcastID: c.BroadcastID, Target: c.Target, UserID: c.UserID, Type: typ,
		Variant: c.Variant, Localized: c.Localized, Platform: c.Platform, Sent: c.Sent, At: at,
	}, c.Test, ""
}

// write is the writer: it takes the posts queued, commits them as one
// group, and answers each. At stop it commits what is queued, then ends.
func (g *Ingester) write(ctx context.Context) {
	for {
		var first *post
		select {
		case first = <-g.queue:
		case <-ctx.Done():
			g.stopOnce.Do(func() { close(g.stopping) })
			g.mu.Lock() // every post being queued is in the queue now
			g.mu.Unlock()
			g.drain()
			return
		}
		g.commit(g.gather(first))
	}
}

// gather adds to first every post queued now, up to maxGroup events.
func (g *Ingester) gather(first *post) []*post {
	group := []*post{first}
	n := len(first.evs)
	for n < maxGroup {
		select {
		case p := <-g.queue:
			group = append(group, p)
			n += len(p.evs)
			continue
		default:
		}
		break
	}
	return group
}

// drain commits the posts still queued at stop (none is queued after it).
func (g *Ingester) drain() {
	for {
		select {
		case p := <-g.queue:
			g.commit(g.gather(p))
		default:
			return
		}
	}
}

// commit stores a group's events in one transaction and answers its posts.
func (g *Ingester) commit(group []*post) {
	var all []model.EngagementEvent
	for _, p := range group {
		all = append(all, p.evs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	res, err := g.store.StoreEvents(ctx, all)
	cancel()
	if err != nil {
		g.log.Warn("storing events failed; the apps are told to retry", "events", len(all), "err", err)
		err = fmt.Errorf("engagement: storing events: %w", err)
	}
	if err == nil && g.OnCommitted != nil {
		var stored, dups int
		for _, r := range res {
			switch r {
			case model.EventStored:
				stored++
			case model.EventDuplicate:
				dups++
			}
		}
		g.OnCommitted(stored, dups)
	}
	for _, p := range group {
		if err != nil {
			p.err = err
		} else {
			p.res, res = res[:len(p.evs)], res[len(p.evs):]
		}
		close(p.done)
	}
}
