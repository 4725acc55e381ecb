package webhook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"pushfan/audit"
	"pushfan/internal/platform/sqldb"
)

// Health is an endpoint's state, for operators.
type Health struct {
	Name string
	URL  string
	// LastSuccess is its latest delivery (nil: none yet).
	LastSuccess *time.Time
	// Failing is how many attempts its oldest waiting event has failed:
	// the failures since the endpoint last took one.
	Failing int
	// Queued is how many of its events wait for delivery.
	Queued int64
	// Disabled is when it was disabled after failing for a day (nil: it
	// is not), and DisabledFor why.
	Disabled    *time.Time
	DisabledFor string
}

// Delivery is one event to one endpoint, as stored.
type Delivery struct {
	ID          uint64
	MsgID       string
	Type        string
	BroadcastID *uint64
	Status      string
	Attempts    int
	LastStatus  *int
	LastError   *string
	CreatedAt   time.Time
	NextAt      time.Time
	DeliveredAt *time.Time
}

// ErrNotFound: no such endpoint or delivery.
var ErrNotFound = errors.New("webhook: not found")

// Status reports every endpoint's health, in configuration order. It
// reads each endpoint's row (its last success and whether it is disabled)
// and its waiting events on ix_webhook_waiting (how many, and the oldest
// one's attempts): never the delivered events, however many the outbox
// keeps.
func (d *Deliverer) Status(ctx context.Context) ([]Health, error) {
	out := make([]Health, 0, len(d.order))
	for _, e := range d.order {
		h := Health{Name: e.Name, URL: e.URL}
		var last, at sql.NullTime
		var why sql.NullString
		err := d.db.QueryRowContext(ctx, `SELECT last_success, disabled_at, reason FROM webhook_endpoints WHERE name = ?`, e.Name).Scan(&last, &at, &why)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("webhook health of %s: %w", e.Name, err)
		}
		if last.Valid {
			t := last.Time.UTC()
			h.LastSuccess = &t
		}
		if at.Valid {
			t := at.Time.UTC()
			h.Disabled, h.DisabledFor = &t, why.String
		}
		var oldest sql.NullInt64
		if err := d.db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(id) FROM webhook_outbox FORCE INDEX (ix_webhook_waiting) WHERE endpoint = ? AND status = 'pending'`, e.Name).
			Scan(&h.Queued, &oldest); err != nil {
			return nil, fmt.Errorf("webhook health of %s: %w", e.Name, err)
		}
		if oldest.Valid {
			err := d.db.QueryRowContext(ctx, `SELECT attempts FROM webhook_outbox WHERE id = ?`, oldest.Int64).Scan(&h.Failing)
			if err != nil && !errors.Is(err, sql.ErrNoRows) { // delivered and purged since: none failing
				return nil, fmt.Errorf("webhook health of %s: %w", e.Name, err)
			}
		}
		out = append(out, h)
	}
	return out, nil
}

// backfillLastSuccess gives the endpoints whose row has no last success
// the latest delivery in the outbox: once after the upgrade that added
// the column (the previous release kept none), then never again, as every
// delivery sets it. An endpoint that never took an event reads an empty
// range of ix_webhook_waiting each time.
func (d *Deliverer) backfillLastSuccess(ctx context.Context) {
	for _, e := range d.order {
		var have sql.NullTime
		err := d.db.QueryRowContext(ctx, "SELECT last_success FROM webhook_endpoints WHERE name = ?", e.Name).Scan(&have)
		if err == nil && have.Valid {
			continue
		}
		if err == nil || errors.Is(err, sql.ErrNoRows) {
			var last sql.NullTime
			err = d.db.QueryRowContext(ctx, "SELECT MAX(delivered_at) FROM webhook_outbox FORCE INDEX (ix_webhook_waiting) WHERE endpoint = ? AND status = 'delivered'", e.Name).Scan(&last)
			if err == nil && last.Valid {
				_, err = d.db.ExecContext(ctx, `INSERT INTO webhook_endpoints (name, last_success) VALUES (?, ?)
					ON DUPLICATE KEY UPDATE last_success = GREATEST(COALESCE(last_success, VALUES(last_success)), VALUES(last_success))`, e.Name, last.Time)
			}
		}
		if err != nil && ctx.Err() == nil {
			d.log.Warn("webhooks: reading an endpoint's last success from the outbox failed; it shows none until its next delivery", "endpoint", e.Name, "err", err)
		}
	}
}

// Deliveries pages endpoint's deliveries newest first: those with an id
// below before (0: from the newest), limit at most.
func (d *Deliverer) Deliveries(ctx context.Context, endpoint string, broadcastID, before uint64, limit int) ([]Delivery, error) {
	if d.endpoints[endpoint] == nil {
		return nil, fmt.Errorf("endpoint %q: %w", endpoint, ErrNotFound)
	}
	q := `SELECT id, msg_id, type, broadcast_id, status, attempts, last_status, last_error, created_at, next_at, delivered_at
		FROM webhook_outbox WHERE endpoint = ?`
	args := []any{endpoint}
	if broadcastID != 0 {
		q += " AND broadcast_id = ?"
		args = append(args, broadcastID)
	}
	if before != 0 {
		q += " AND id < ?"
		args = append(args, before)
	}
	q += " ORDER BY id DESC LIMIT ?"
	rows, err := d.db.QueryContext(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("webhook deliveries: %w", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		var x Delivery
		var bid sql.NullInt64
		var st sql.NullInt32
		var le sql.NullString
		var at sql.NullTime
		if err := rows.Scan(&x.ID, &x.MsgID, &x.Type, &bid, &x.Status, &x.Attempts, &st, &le, &x.CreatedAt, &x.NextAt, &at); err != nil {
			return nil, fmt.Errorf("webhook deliveries: %w", err)
		}
		if bid.Valid {
			v := uint64(bid.Int64)
			x.BroadcastID = &v
		}
		if st.Valid {
			v := int(st.Int32)
			x.LastStatus = &v
		}
		if le.Valid {
			x.LastError = &le.String
		}
		if at.Valid {
			t := at.Time.UTC()
			x.DeliveredAt = &t
		}
		x.CreatedAt, x.NextAt = x.CreatedAt.UTC(), x.NextAt.UTC()
		out = append(out, x)
	}
	return out, rows.Err()
}

// Redeliver sends delivery id of endpoint again, at once, with its
// webhook-id (whatever it ended as: delivered, gone, expired or waiting).
func (d *Deliverer) Redeliver(ctx context.Context, endpoint string, id uint64) error {
	// One transaction with the request's audit entry.
	err := sqldb.InTx(ctx, d.db, d.log, "redeliver", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE webhook_outbox SET status = 'pending', next_at = UTC_TIMESTAMP(6), created_at = UTC_TIMESTAMP(6)
			WHERE id = ? AND endpoint = ?`, id, endpoint)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var one int
			if err := tx.QueryRowContext(ctx, "SELECT 1 FROM webhook_outbox WHERE id = ? AND endpoint = ?", id, endpoint).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("delivery %d of %q: %w", id, endpoint, ErrNotFound)
			}
		}
		return audit.Write(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("redeliver: %w", err)
	}
	d.Wake()
	return nil
}

// Enable takes a disabled endpoint back: its waiting events are due now,
// each with a new day before it expires.
func (d *Deliverer) Enable(ctx context.Context, endpoint string) error {
	if d.endpoints[endpoint] == nil {
		return fmt.Errorf("endpoint %q: %w", endpoint, ErrNotFound)
	}
	// One transaction: the endpoint, its waiting events and the request's
	// audit entry.
	err := sqldb.InTx(ctx, d.db, d.log, "enable endpoint", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE webhook_endpoints SET disabled_at = NULL, reason = NULL WHERE name = ?", endpoint); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_outbox SET next_at = UTC_TIMESTAMP(6), created_at = UTC_TIMESTAMP(6)
			WHERE endpoint = ? AND status = 'pending'`, endpoint); err != nil {
			return err
		}
		return audit.Write(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("enable %s: %w", endpoint, err)
	}
	d.Wake()
	return nil
}
