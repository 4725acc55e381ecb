package repository

import (
	"context"
	"fmt"
	"time"

	"pushfan/internal/platform/clock"
)

// auditTable is the audit trail, its old entries deleted by their key.
var auditTable = purgedTable{name: "audit_entries", key: []keyCol{uintKey("id")}}

// PurgeAudit deletes the audit entries written before cutoff, a batch at
// a time as the broadcasts' rows are (purgeRows): a plain read of a
// batch's ids through idx_audit_at, which locks nothing, then a delete of
// exactly those ids by their whole key, which locks those rows only; a
// "DELETE … WHERE at < ?" would lock the index range and the gap after
// it, where new entries go while requests commit. Between batches it
// sleeps pause, or as long as the batch took if longer. It returns how
// many it deleted.
func (s *Store) PurgeAudit(ctx context.Context, cutoff time.Time, pause time.Duration) (int64, error) {
	var total int64
	for {
		began := time.Now()
		var ids []uint64
		if err := s.db.SelectContext(ctx, &ids, "SELECT id FROM audit_entries FORCE INDEX (idx_audit_at) WHERE at < ? ORDER BY at LIMIT ?",
			dbTime(cutoff), purgeRowBatch); err != nil {
			return total, fmt.Errorf("purge audit entries: read: %w", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		keys := make([][]any, len(ids))
		for i, id := range ids {
			keys[i] = []any{id}
		}
		del, args, err := deleteKeys(auditTable, keys)
		if err != nil {
			return total, fmt.Errorf("purge audit entries: %w", err)
		}
		res, err := s.db.ExecContext(ctx, del, args...)
		if err != nil {
			return total, fmt.Errorf("purge audit entries: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("purge audit entries: %w", err)
		}
		total += n
		if len(ids) < purgeRowBatch {
			return total, nil
		}
		if err := clock.Sleep(ctx, max(pause, time.Since(began))); err != nil {
			return total, err
		}
	}
}
