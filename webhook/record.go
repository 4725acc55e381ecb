package webhook

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"pushfan/internal/platform/sqldb"
)

// deliver makes one attempt at r, under its own timeout (a Stop does not
// cut it short), and records what it did.
func (d *Deliverer) deliver(ctx context.Context, r row) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.timeout)
	status, err := d.attempt(actx, d.endpoints[r.endpoint], r) // claimed by endpoint: configured
	cancel()
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := d.record(bg, r, status, err); err != nil {
		// The row's lease lapses and it is attempted again: at least once.
		d.log.Warn("webhooks: recording a delivery failed", "webhook_id", r.msgID, "err", err)
	}
}

// outcome is what recording an attempt did.
type outcome struct {
	lost     bool // the claim was no longer the attempt's: nothing written
	disabled bool // the event expired and disabled its endpoint
}

// record writes the result of r's attempt (status, or failed with
// attemptErr) if r's claim is still the attempt's: a delivery also moves
// its endpoint's last success, in the same transaction. A result whose
// claim was lost changes nothing (logged, and told to OnLostClaim): the
// instance that took the row over records its own attempt.
func (d *Deliverer) record(ctx context.Context, r row, status int, attemptErr error) error {
	var o outcome
	var why string
	err := sqldb.InTx(ctx, d.db, d.log, "record a webhook delivery", func(tx *sql.Tx) error {
		o = outcome{}
		var res sql.Result
		var err error
		switch {
		case attemptErr == nil && status >= 200 && status < 300:
			res, err = tx.ExecContext(ctx, "UPDATE webhook_outbox SET status = 'delivered', attempts = attempts + 1, last_status = ?, last_error = NULL, delivered_at = UTC_TIMESTAMP(6), claim_token = NULL"+claimIsOurs,
				status, r.id, r.token, r.until)
			if o.lost, err = lost(res, err); err != nil || o.lost {
				return err
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO webhook_endpoints (name, last_success) SELECT ?, delivered_at FROM webhook_outbox WHERE id = ?
				ON DUPLICATE KEY UPDATE last_success = GREATEST(COALESCE(last_success, VALUES(last_success)), VALUES(last_success))`, r.endpoint, r.id)
			return err
		case attemptErr == nil && status == http.StatusGone:
			res, err = tx.ExecContext(ctx, "UPDATE webhook_outbox SET status = 'gone', attempts = attempts + 1, last_status = ?, claim_token = NULL"+claimIsOurs,
				status, r.id, r.token, r.until)
			o.lost, err = lost(res, err)
			return err
		}
		why = fmt.Sprintf("answered %d", status)
		if attemptErr != nil {
			why = attemptErr.Error()
		}
		if len(why) > maxErrorLen {
			why = why[:maxErrorLen]
		}
		next := "pending"
		if time.Since(r.createdAt) > giveUpAfter {
			next = "expired"
		}
		d.mu.Lock()
		wait := backoff(r.attempts+1, d.retry, d.rand)
		d.mu.Unlock()
		var st any
		if status != 0 {
			st = status
		}
		res, err = tx.ExecContext(ctx, "UPDATE webhook_outbox SET status = ?, attempts = attempts + 1, last_status = ?, last_error = ?, next_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, claim_token = NULL"+claimIsOurs,
			next, st, why, wait.Microseconds(), r.id, r.token, r.until)
		if o.lost, err = lost(res, err); err != nil || o.lost || next != "expired" {
			return err
		}
		o.disabled, err = disable(ctx, tx, r.endpoint, why)
		return err
	})
	if err != nil {
		return err
	}
	switch {
	case o.lost:
		d.log.Warn("webhooks: another instance took this delivery over before its result was recorded; the result is dropped",
			"endpoint", r.endpoint, "webhook_id", r.msgID, "status", status, "err", attemptErr)
		if d.OnLostClaim != nil {
			d.OnLostClaim(r.endpoint)
		}
	case status == http.StatusGone && attemptErr == nil:
		d.log.Warn("webhooks: the endpoint answered 410 Gone; this event will not be sent again", "endpoint", r.endpoint, "webhook_id", r.msgID)
	case o.disabled:
		d.log.Error("webhooks: an event failed for a day and expired; the endpoint is disabled until enabled again", "endpoint", r.endpoint, "webhook_id", r.msgID, "attempts", r.attempts+1, "last_error", why)
		if d.OnDisabled != nil {
			d.OnDisabled(r.endpoint)
		}
	}
	return nil
}

// lost reports whether a conditional update found its claim gone.
func lost(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 0, err
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

// disable marks endpoint disabled, in tx: an event of its failed for a
// day. Its other events wait, unexpired, until it is enabled again
// (Enable). It reports whether this disabled it (it was not already).
func disable(ctx context.Context, tx *sql.Tx, endpoint, why string) (bool, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO webhook_endpoints (name, disabled_at, reason) VALUES (?, UTC_TIMESTAMP(6), ?)
		ON DUPLICATE KEY UPDATE reason = IF(disabled_at IS NULL, VALUES(reason), reason), disabled_at = COALESCE(disabled_at, VALUES(disabled_at))`, endpoint, why)
	if err != nil {
		return false, fmt.Errorf("disabling endpoint %s: %w", endpoint, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
