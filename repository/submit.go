package repository

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"pushfan/internal/sqldb"
	"pushfan/lease"
)

// ErrDuplicateKey: a broadcast with this idempotency key exists.
var ErrDuplicateKey = errors.New("idempotency key already used")

// Planner splits a broadcast's audience into chunks. It runs inside the
// transaction that stores the chunks (tx reads the bundled tables; a named
// audience reads the deployment's own through its own connection) and
// returns the chunks and the audience snapshot (the highest token id now:
// tokens registered later are not part of the broadcast).
type Planner func(ctx context.Context, tx *sql.Tx, b *Broadcast) (plans []lease.Plan, maxTokenID uint64, err error)

// SubmitBroadcast stores b together with its chunks, in one transaction,
// so no broadcast exists without the work that completes it: status queued
// with the chunks plan makes, or scheduled (b.SendAt set; PromoteDue plans
// it when it is due). b.SubmitToken, when set, makes the submit
// recognisable after a lost commit answer (FindBySubmitToken). With
// b.IdempotencyKey set and already used, it returns ErrDuplicateKey.
func (s *Store) SubmitBroadcast(ctx context.Context, b *Broadcast, plan Planner) error {
	if b.Audience.All && len(b.Audience.UserIDs) > 0 {
		return fmt.Errorf("submit broadcast: %w", errAmbiguousAudience)
	}
	msg, aud, err := encodeContent(b)
	if err != nil {
		return fmt.Errorf("submit broadcast: %w", err)
	}
	b.Status = StatusQueued
	if b.SendAt != nil {
		b.Status = StatusScheduled
	}
	err = sqldb.InTx(ctx, s.db.DB, s.log, "submit broadcast", func(tx *sql.Tx) error {
		var plans []lease.Plan
		if b.Status == StatusQueued {
			var err error
			if plans, b.MaxTokenID, err = plan(ctx, tx, b); err != nil {
				return err
			}
			b.Targeted = plannedTargets(plans)
		}
		id, createdAt, err := insertBroadcast(ctx, tx, b, string(msg), string(aud))
		if err != nil {
			if sqldb.IsDuplicateEntry(err) && strings.Contains(err.Error(), "uq_broadcasts_idempotency") {
				return ErrDuplicateKey
			}
			return err
		}
		b.ID, b.CreatedAt = id, createdAt.UTC()
		return lease.InsertChunks(ctx, tx, b.ID, plans)
	})
	if errors.Is(err, ErrDuplicateKey) {
		return fmt.Errorf("submit broadcast: %w", ErrDuplicateKey)
	}
	return err
}

// plannedTargets is the audience size when every chunk's count is known
// at planning time (user_ids), else 0 until the estimate arrives.
func plannedTargets(plans []lease.Plan) int64 {
	var n int64
	for _, p := range plans {
		if p.Targets < 0 {
			return 0
		}
		n += p.Targets
	}
	return n
}

// FindByIdempotencyKey returns the broadcast submitted with key.
func (s *Store) FindByIdempotencyKey(ctx context.Context, key string) (*Broadcast, error) {
	return s.findBy(ctx, "idempotency_key", key)
}

// FindBySubmitToken returns the broadcast stored with token, if that
// submit committed. The locking read waits for a commit still in progress
// on the server, so "not found" means it did not happen.
func (s *Store) FindBySubmitToken(ctx context.Context, token string) (*Broadcast, error) {
	var id uint64
	err := sqldb.InTx(ctx, s.db.DB, s.log, "find submit", func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT id FROM broadcasts WHERE submit_token = ? FOR UPDATE", token).Scan(&id)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("submit token: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("find submit token: %w", err)
	}
	return s.GetBroadcast(ctx, id)
}

func (s *Store) findBy(ctx context.Context, column, value string) (*Broadcast, error) {
	var id uint64
	err := s.db.QueryRowContext(ctx, "SELECT id FROM broadcasts WHERE "+column+" = ?", value).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", column, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("find by %s: %w", column, err)
	}
	return s.GetBroadcast(ctx, id)
}

// PromoteDue turns scheduled broadcasts whose send_at has come into queued
// ones with their chunks (planned now: the audience is snapshotted when the
// broadcast becomes due), and returns their ids. Row locks with SKIP LOCKED
// make each promotion happen on exactly one instance however many poll at
// once; a promotion repeated after a lost commit answer finds nothing due.
func (s *Store) PromoteDue(ctx context.Context, plan Planner) ([]uint64, error) {
	var ids []uint64
	err := sqldb.InTx(ctx, s.db.DB, s.log, "promote scheduled broadcasts", func(tx *sql.Tx) error {
		ids = ids[:0]
		rows, err := tx.QueryContext(ctx, `SELECT id, audience FROM broadcasts WHERE status = 'scheduled' AND send_at <= UTC_TIMESTAMP(6)
			ORDER BY send_at, id LIMIT 20 FOR UPDATE SKIP LOCKED`)
		if err != nil {
			return fmt.Errorf("select due: %w", err)
		}
		var due []*Broadcast
		for rows.Next() {
			b := &Broadcast{}
			var aud string
			if err := rows.Scan(&b.ID, &aud); err != nil {
				rows.Close()
				return fmt.Errorf("scan: %w", err)
			}
			if err := json.Unmarshal([]byte(aud), &b.Audience); err != nil {
				rows.Close()
				return fmt.Errorf("broadcast %d: decode audience: %w", b.ID, err)
			}
			due = append(due, b)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("select due: %w", err)
		}
		for _, b := range due {
			plans, maxID, err := plan(ctx, tx, b)
			if err != nil {
				return fmt.Errorf("plan broadcast %d: %w", b.ID, err)
			}
			if err := lease.InsertChunks(ctx, tx, b.ID, plans); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "UPDATE broadcasts SET status = 'queued', max_token_id = ?, targeted = ? WHERE id = ?",
				maxID, plannedTargets(plans), b.ID); err != nil {
				return fmt.Errorf("queue %d: %w", b.ID, err)
			}
			ids = append(ids, b.ID)
		}
		return nil
	})
	return ids, err
}
