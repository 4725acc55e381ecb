package webhook

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"time"

	"pushfan/internal/platform/sqldb"
)

// row is one claimed attempt: the event, and the claim (token and lease)
// its result must still find to be recorded.
type row struct {
	id        uint64
	msgID     string
	endpoint  string
	body      []byte
	attempts  int
	createdAt time.Time
	token     int64     // claim_token written by the claim
	until     time.Time // next_at written by the claim: the lease's end
}

// claim takes up to n due rows of endpoint, each for one attempt that
// starts now: a fresh claim token, and next_at moved past the attempt's
// timeout and the margin, so that no other instance takes them meanwhile
// (its claims skip rows locked by this one and wait for due ones). The
// claim runs to its end even when ctx ends, so that the caller knows
// every row it holds and can hand them back.
func (d *Deliverer) claim(ctx context.Context, endpoint string, n int) ([]row, error) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	token := rand.Int64()
	var out []row
	err := sqldb.InTx(bg, d.db, d.log, "claim webhook deliveries", func(tx *sql.Tx) error {
		out = out[:0]
		// UTC_TIMESTAMP(6) is one instant within the statement: the rows
		// are due at it, and the lease starts at it.
		rs, err := tx.QueryContext(bg, `SELECT id, msg_id, body, attempts, created_at, UTC_TIMESTAMP(6) FROM webhook_outbox
			WHERE endpoint = ? AND status = 'pending' AND next_at <= UTC_TIMESTAMP(6)
			ORDER BY next_at LIMIT ? FOR UPDATE SKIP LOCKED`, endpoint, n)
		if err != nil {
			return fmt.Errorf("select: %w", err)
		}
		var now time.Time
		for rs.Next() {
			r := row{endpoint: endpoint, token: token}
			if err := rs.Scan(&r.id, &r.msgID, &r.body, &r.attempts, &r.createdAt, &now); err != nil {
				rs.Close()
				return fmt.Errorf("scan: %w", err)
			}
			out = append(out, r)
		}
		rs.Close()
		if err := rs.Err(); err != nil || len(out) == 0 {
			return err
		}
		until := now.Add(d.timeout + d.margin).Truncate(time.Microsecond)
		args := []any{token, until}
		for i := range out {
			out[i].until = until
			args = append(args, out[i].id)
		}
		_, err = tx.ExecContext(bg, "UPDATE webhook_outbox SET claim_token = ?, next_at = ? WHERE id IN ("+sqldb.InList(len(out))+")", args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// release hands back claimed rows whose attempts did not start (the
// deliverer is stopping): due at once, for any instance, with no attempt
// charged.
func (d *Deliverer) release(rows []row) {
	if len(rows) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	for _, r := range rows {
		if _, err := d.db.ExecContext(ctx, "UPDATE webhook_outbox SET claim_token = NULL, next_at = UTC_TIMESTAMP(6)"+claimIsOurs, r.id, r.token, r.until); err != nil {
			// The lease lapses on its own: due again after it, uncharged.
			d.log.Warn("webhooks: handing back a claimed delivery failed", "webhook_id", r.msgID, "err", err)
		}
	}
}

// claimIsOurs is the condition under which a claim's holder may write its
// row: still pending, with the holder's token and lease. Another instance
// that took the row over (after the lease ran out) wrote its own token,
// and the previous release, which writes no token, moved next_at.
const claimIsOurs = " WHERE id = ? AND status = 'pending' AND claim_token = ? AND next_at = ?"

// disabledEndpoints are the endpoints disabled after failing for a day:
// their events wait, unclaimed.
func (d *Deliverer) disabledEndpoints(ctx context.Context) (map[string]bool, error) {
	rs, err := d.db.QueryContext(ctx, "SELECT name FROM webhook_endpoints WHERE disabled_at IS NOT NULL")
	if err != nil {
		return nil, fmt.Errorf("disabled webhook endpoints: %w", err)
	}
	defer rs.Close()
	out := map[string]bool{}
	for rs.Next() {
		var name string
		if err := rs.Scan(&name); err != nil {
			return nil, fmt.Errorf("disabled webhook endpoints: %w", err)
		}
		out[name] = true
	}
	return out, rs.Err()
}
