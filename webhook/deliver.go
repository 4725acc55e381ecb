package webhook

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"pushfan/internal/platform/lifecycle"
	"pushfan/internal/platform/sqldb"
)

// Delivery settings.
const (
	claimBatch  = 100 // rows one claim takes
	perEndpoint = 4   // deliveries in flight to one endpoint at once
	// giveUpAfter is how long an event is retried before it expires.
	giveUpAfter = 24 * time.Hour
	maxErrorLen = 255
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

// Deliverer sends the outbox: any instance, each row claimed by one
// (SKIP LOCKED, and a lease of the attempt's timeout in next_at, so a row
// whose instance died is due again), at least once, with the same
// webhook-id every attempt.
type Deliverer struct {
	db        *sql.DB
	endpoints map[string]*Endpoint
	order     []*Endpoint // as configured
	client    *http.Client
	timeout   time.Duration
	poll      time.Duration
	retry     []time.Duration // backoff's schedule
	log       *slog.Logger
	loop      lifecycle.Loop
	wake      chan struct{}

	mu   sync.Mutex
	rand *rand.Rand

	// OnDisabled, if set, is told when an endpoint is disabled (a metric).
	OnDisabled func(endpoint string)
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
	return &Deliverer{db: db, endpoints: m, order: endpoints, client: client, timeout: timeout, poll: poll, retry: slices.Clone(retry), log: log,
		wake: make(chan struct{}, 1), rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
}

// Start starts delivering (nothing when no endpoint is configured).
func (d *Deliverer) Start(ctx context.Context) {
	if len(d.endpoints) == 0 {
		return
	}
	d.loop.Start(ctx, d.run)
}

// Stop stops claiming; attempts in flight finish (bounded by the timeout).
func (d *Deliverer) Stop(ctx context.Context) error { return d.loop.Stop(ctx) }

// Wake has the deliverer look at once (an event was just written here).
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

type row struct {
	id        uint64
	msgID     string
	endpoint  string
	body      []byte
	attempts  int
	createdAt time.Time
}

func (d *Deliverer) run(ctx context.Context) {
	idle := time.NewTimer(0)
	defer idle.Stop()
	for {
		rows, err := d.claim(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("webhooks: claiming deliveries failed", "err", err)
		}
		if len(rows) > 0 {
			d.deliverAll(ctx, rows)
			if len(rows) == claimBatch {
				continue // more may be due
			}
		}
		idle.Reset(d.poll)
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-idle.C:
		}
	}
}

// claim takes due rows for this instance: their next_at moves past an
// attempt's timeout, so no other instance takes them meanwhile.
func (d *Deliverer) claim(ctx context.Context) ([]row, error) {
	var out []row
	err := sqldb.InTx(ctx, d.db, d.log, "claim webhook deliveries", func(tx *sql.Tx) error {
		out = out[:0]
		rs, err := tx.QueryContext(ctx, `SELECT id, msg_id, endpoint, body, attempts, created_at FROM webhook_outbox
			WHERE status = 'pending' AND next_at <= UTC_TIMESTAMP(6)
				AND endpoint NOT IN (SELECT name FROM webhook_endpoints WHERE disabled_at IS NOT NULL)
			ORDER BY next_at LIMIT ? FOR UPDATE SKIP LOCKED`, claimBatch)
		if err != nil {
			return fmt.Errorf("select: %w", err)
		}
		for rs.Next() {
			var r row
			if err := rs.Scan(&r.id, &r.msgID, &r.endpoint, &r.body, &r.attempts, &r.createdAt); err != nil {
				rs.Close()
				return fmt.Errorf("scan: %w", err)
			}
			out = append(out, r)
		}
		rs.Close()
		if err := rs.Err(); err != nil || len(out) == 0 {
			return err
		}
		args := []any{(d.timeout + 30*time.Second).Microseconds()}
		for _, r := range out {
			args = append(args, r.id)
		}
		_, err = tx.ExecContext(ctx, "UPDATE webhook_outbox SET next_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE id IN ("+sqldb.InList(len(out))+")", args...)
		return err
	})
	return out, err
}

// deliverAll attempts rows at once, perEndpoint at most to one endpoint.
func (d *Deliverer) deliverAll(ctx context.Context, rows []row) {
	sems := map[string]chan struct{}{}
	var wg sync.WaitGroup
	for _, r := range rows {
		sem := sems[r.endpoint]
		if sem == nil {
			sem = make(chan struct{}, perEndpoint)
			sems[r.endpoint] = sem
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d.deliver(ctx, r)
		})
	}
	wg.Wait()
}

// deliver makes one attempt at r and records what it did.
func (d *Deliverer) deliver(ctx context.Context, r row) {
	e := d.endpoints[r.endpoint]
	status, err := 0, error(nil)
	if e == nil {
		err = errors.New("no such endpoint in this instance's configuration")
	} else {
		status, err = d.attempt(ctx, e, r)
	}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch {
	case err == nil && status >= 200 && status < 300:
		_, err = d.db.ExecContext(bg, "UPDATE webhook_outbox SET status = 'delivered', attempts = attempts + 1, last_status = ?, last_error = NULL, delivered_at = UTC_TIMESTAMP(6) WHERE id = ?", status, r.id)
	case err == nil && status == http.StatusGone:
		d.log.Warn("webhooks: the endpoint answered 410 Gone; this event will not be sent again", "endpoint", r.endpoint, "webhook_id", r.msgID)
		_, err = d.db.ExecContext(bg, "UPDATE webhook_outbox SET status = 'gone', attempts = attempts + 1, last_status = ? WHERE id = ?", status, r.id)
	default:
		why := fmt.Sprintf("answered %d", status)
		if err != nil {
			why = err.Error()
		}
		if len(why) > maxErrorLen {
			why = why[:maxErrorLen]
		}
		n := r.attempts + 1
		next := "pending"
		if time.Since(r.createdAt) > giveUpAfter {
			next = "expired"
			d.log.Error("webhooks: an event failed for a day and expired; the endpoint is disabled until enabled again", "endpoint", r.endpoint, "webhook_id", r.msgID, "attempts", n, "last_error", why)
			d.disable(bg, r.endpoint, why)
		}
		d.mu.Lock()
		wait := backoff(n, d.retry, d.rand)
		d.mu.Unlock()
		var st any
		if status != 0 {
			st = status
		}
		_, err = d.db.ExecContext(bg, "UPDATE webhook_outbox SET status = ?, attempts = ?, last_status = ?, last_error = ?, next_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE id = ?",
			next, n, st, why, wait.Microseconds(), r.id)
	}
	if err != nil {
		// The row's lease lapses and it is attempted again: at least once.
		d.log.Warn("webhooks: recording a delivery failed", "webhook_id", r.msgID, "err", err)
	}
}

// attempt POSTs r to e, signed, and returns the answer's status.
func (d *Deliverer) attempt(ctx context.Context, e *Endpoint, r row) (int, error) {
	ts := time.Now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(r.body))
	if err != nil {
		return 0, fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "pushfan-webhooks")
	req.Header.Set("webhook-id", r.msgID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", e.Sign(r.msgID, ts, r.body))
	resp, err := d.client.Do(req)
	if err != nil {
		// The error names the URL, never the secret (it is in no URL).
		return 0, strip(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// strip shortens a transport error to its cause.
func strip(err error) error {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i > 0 && errors.Is(err, ErrPrivateAddress) {
		return fmt.Errorf("%w (%s)", ErrPrivateAddress, s[i+2:])
	}
	return err
}

// disable marks endpoint disabled: it has failed for a day. Its other
// events wait, unexpired, until it is enabled again (Enable).
func (d *Deliverer) disable(ctx context.Context, endpoint, why string) {
	res, err := d.db.ExecContext(ctx, `INSERT INTO webhook_endpoints (name, disabled_at, reason) VALUES (?, UTC_TIMESTAMP(6), ?)
		ON DUPLICATE KEY UPDATE reason = IF(disabled_at IS NULL, VALUES(reason), reason), disabled_at = COALESCE(disabled_at, VALUES(disabled_at))`, endpoint, why)
	if err != nil {
		d.log.Warn("webhooks: marking an endpoint disabled failed", "endpoint", endpoint, "err", err)
		return
	}
	if n, _ := res.RowsAffected(); n > 0 && d.OnDisabled != nil {
		d.OnDisabled(endpoint)
	}
}
