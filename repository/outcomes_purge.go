package repository

import (
	"context"
	"fmt"
	"time"
)

// PurgeOutcomes deletes the kept per-target outcomes (target_outcomes, canceled_rests) of
// up to purgeBroadcastBatch broadcasts that finished before cutoff
// (PUSHFAN_OUTCOME_RETENTION), and returns how many broadcasts it cleared.
// The broadcasts themselves stay until PUSHFAN_RETENTION, whose purge
// takes any outcomes left with them.
//
// As PurgeFinished does, it reads the due ids first (a plain read: the
// EXISTS is an index probe per finished broadcast, and a cleared one is
// not picked again), then deletes each one's rows through its key prefix,
// a batch of whole keys per statement with a pause after each: no table
// lock, no gap lock beside a running broadcast's rows.
func (s *Store) PurgeOutcomes(ctx context.Context, cutoff time.Time, pause time.Duration) (int, error) {
	var ids []uint64
	if err := s.db.SelectContext(ctx, &ids, `SELECT b.id FROM broadcasts b WHERE b.finished_at < ?
			AND (EXISTS (SELECT 1 FROM target_outcomes o WHERE o.broadcast_id = b.id)
				OR EXISTS (SELECT 1 FROM canceled_rests r WHERE r.broadcast_id = b.id)) ORDER BY b.finished_at LIMIT ?`,
		dbTime(cutoff), purgeBroadcastBatch); err != nil {
		return 0, fmt.Errorf("purge outcomes: select: %w", err)
	}
	// A cancel's rests (canceled_rests) go with the outcomes they stand
	// for: without them an export would list fewer lines than targeted.
	ts := []purgedTable{{name: "target_outcomes", key: targetOutcomesKey}, {name: "canceled_rests", key: canceledRestsKey}}
	for _, id := range ids {
		for _, t := range ts {
			if _, err := purgeRows(ctx, s.db, t, []uint64{id}, pause); err != nil {
				return 0, fmt.Errorf("purge the outcomes of broadcast %d: %w", id, err)
			}
		}
	}
	return len(ids), nil
}
