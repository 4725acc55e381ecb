package webhook

import (
	"context"
	"database/sql"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"pushfan/internal/platform/lifecycle"
)

// Delivery settings.
const (
	perEndpoint = 4 // attempts in flight to one endpoint at once, per instance
	// leaseMargin is how long an attempt's claim outlasts its timeout: the
	// time to record its result before another instance may take the row.
	leaseMargin = 30 * time.Second
	// giveUpAfter is how long an event is retried before it expires.
	giveUpAfter = 24 * time.Hour
	maxErrorLen = 255
	// recordTimeout bounds the database writes of one claim or result.
	recordTimeout = 10 * time.Second
)

// backoff is the wait after the nth failed attempt (from 1): the nth step
// of schedule (not empty), the last one past its end, each ±20 % so that
// the events of one outage are not all retried at the same instant.
func backoff(n int, schedule []time.Duration, r *rand.Rand) time.Duration {
	d := schedule[len(schedule)-1]
	if n >= 1 && n <= len(schedule) {
		d = schedule[n-1]
	}
	return time.Duration(float64(d) * (0.8 + 0.4*r.Float64()))
}

// Deliverer sends the outbox: any instance, at least once, with the same
// webhook-id every attempt. Each attempt is claimed on its own just before
// it starts (claim.go): SKIP LOCKED, a random claim token, and a lease of
// the attempt's timeout and a margin in next_at, so a row whose instance
// died is due again. Its result is recorded only if the claim is still
// the attempt's (record.go).
type Deliverer struct {
	db        *sql.DB
	endpoints map[string]*Endpoint
	order     []*Endpoint // as configured
	client    *http.Client
	timeout   time.Duration
	margin    time.Duration // leaseMargin (shorter in tests)
	poll      time.Duration
	retry     []time.Duration // backoff's schedule
	log       *slog.Logger
	loop      lifecycle.Loop
	wake      chan struct{}

	mu   sync.Mutex
	rand *rand.Rand

	// OnDisabled, if set, is told when an endpoint is disabled (a metric).
	OnDisabled func(endpoint string)
	// OnLostClaim, if set, is told when an attempt's result was dropped
	// because another instance had taken its row meanwhile (a metric).
	OnLostClaim func(endpoint string)
}

// NewDeliverer delivers the outbox of db to endpoints with client, each
// attempt within timeout; an idle deliverer looks for work every poll. A
// failed attempt is retried after the next step of retry (the last one
// repeating, each ±20 %), which must not be empty: the configuration
// checks PUSHFAN_WEBHOOK_RETRY_SCHEDULE at start.
func NewDeliverer(db *sql.DB, endpoints []*Endpoint, client *http.Client, timeout, poll time.Duration, retry []time.Duration, log *slog.Logger) *Deliverer {
	if len(retry) == 0 {
		panic("webhook.NewDeliverer: an empty retry schedule")
	}
	m := make(map[string]*Endpoint, len(endpoints))
	for _, e := range endpoints {
		m[e.Name] = e
	}
	return &Deliverer{db: db, endpoints: m, order: endpoints, client: client, timeout: timeout, margin: leaseMargin, poll: poll, retry: slices.Clone(retry), log: log,
		wake: make(chan struct{}, 1), rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
}

// Start starts delivering (nothing when no endpoint is configured).
func (d *Deliverer) Start(ctx context.Context) {
	if len(d.endpoints) == 0 {
		return
	}
	d.loop.Start(ctx, d.run)
}

// Stop stops claiming and waits (up to ctx) for the attempts in flight,
// which finish under their own timeout and are recorded. Nothing else is
// claimed, so a deploy charges no attempt to an event it did not send.
func (d *Deliverer) Stop(ctx context.Context) error { return d.loop.Stop(ctx) }

// Wake has the deliverer look at once (an event was just written here).
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// run claims and attempts until ctx ends. Each endpoint has perEndpoint
// slots; a free slot is filled by claiming one due row of that endpoint,
// whose attempt starts at once, so no claim waits behind other attempts.
// When ctx ends it claims nothing more and returns once the attempts in
// flight have been recorded.
func (d *Deliverer) run(ctx context.Context) {
	d.backfillLastSuccess(ctx)
	var flight sync.WaitGroup
	defer flight.Wait()
	ended := make(chan string, len(d.order)*perEndpoint) // an attempt's endpoint, when it is recorded
	busy := make(map[string]int, len(d.order))
	idle := time.NewTimer(0)
	defer idle.Stop()
	for {
		for drained := false; !drained; {
			select {
			case name := <-ended:
				busy[name]--
			default:
				drained = true
			}
		}
		d.fill(ctx, busy, func(r row) {
			busy[r.endpoint]++
			flight.Go(func() {
				d.deliver(ctx, r)
				ended <- r.endpoint
			})
		})
		idle.Reset(d.poll)
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-idle.C:
		case name := <-ended:
			busy[name]--
		}
	}
}

// fill claims a due row for each free slot of each enabled endpoint and
// hands it to start. Rows claimed after ctx ended are handed back at once.
func (d *Deliverer) fill(ctx context.Context, busy map[string]int, start func(row)) {
	if ctx.Err() != nil {
		return
	}
	disabled, err := d.disabledEndpoints(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("webhooks: reading the disabled endpoints failed", "err", err)
		}
		return
	}
	for _, e := range d.order {
		free := perEndpoint - busy[e.Name]
		if free <= 0 || disabled[e.Name] {
			continue
		}
		rows, err := d.claim(ctx, e.Name, free)
		if err != nil {
			d.log.Warn("webhooks: claiming deliveries failed", "endpoint", e.Name, "err", err)
			continue
		}
		if ctx.Err() != nil {
			d.release(rows) // stopping: not started, so not charged
			return
		}
		for _, r := range rows {
			start(r)
		}
	}
}
