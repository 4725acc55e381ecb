package webhook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
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

// Status reports every endpoint's health, in configuration order.
func (d *Deliverer) Status(ctx context.Context) ([]Health, error) {
	out := make([]Health, 0, len(d.order))
	for _, e := range d.order {
		h := Health{Name: e.Name, URL: e.URL}
		var last sql.NullTime
		if err := d.db.QueryRowContext(ctx, `SELECT MAX(delivered_at), COUNT(IF(status = 'pending', 1, NULL)) FROM webhook_outbox WHERE endpoint = ?`, e.Name).
			Scan(&last, &h.Queued); err != nil {
			return nil, fmt.Errorf("webhook health of %s: %w", e.Name, err)
		}
		if last.Valid {
			t := last.Time.UTC()
			h.LastSuccess = &t
		}
		err := d.db.QueryRowContext(ctx, `SELECT attempts FROM webhook_outbox WHERE endpoint = ? AND status = 'pending' ORDER BY id LIMIT 1`, e.Name).Scan(&h.Failing)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("webhook health of %s: %w", e.Name, err)
		}
		var at sql.NullTime
		var why sql.NullString
		err = d.db.QueryRowContext(ctx, `SELECT disabled_at, reason FROM webhook_endpoints WHERE name = ?`, e.Name).Scan(&at, &why)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("webhook health of %s: %w", e.Name, err)
		}
		if at.Valid {
			t := at.Time.UTC()
			h.Disabled, h.DisabledFor = &t, why.String
		}
		out = append(out, h)
	}
	return out, nil
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
	res, err := d.db.ExecContext(ctx, `UPDATE webhook_outbox SET status = 'pending', next_at = UTC_TIMESTAMP(6), created_at = UTC_TIMESTAMP(6)
		WHERE id = ? AND endpoint = ?`, id, endpoint)
	if err != nil {
		return fmt.Errorf("redeliver: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var one int
		if err := d.db.QueryRowContext(ctx, "SELECT 1 FROM webhook_outbox WHERE id = ? AND endpoint = ?", id, endpoint).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delivery %d of %q: %w", id, endpoint, ErrNotFound)
		}
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
	if _, err := d.db.ExecContext(ctx, "UPDATE webhook_endpoints SET disabled_at = NULL, reason = NULL WHERE name = ?", endpoint); err != nil {
		return fmt.Errorf("enable %s: %w", endpoint, err)
	}
	if _, err := d.db.ExecContext(ctx, `UPDATE webhook_outbox SET next_at = UTC_TIMESTAMP(6), created_at = UTC_TIMESTAMP(6)
		WHERE endpoint = ? AND status = 'pending'`, endpoint); err != nil {
		return fmt.Errorf("enable %s: %w", endpoint, err)
	}
	d.Wake()
	return nil
}
