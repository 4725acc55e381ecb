package lease

import (
	"context"
	"database/sql"

	"pushfan/lease/outcome"
)

// keepOutcomes keeps every outcome cp lists, holder c's for its checkpoint
// seq, as target_outcomes rows in the checkpoint's transaction
// (outcome.Keep: never a row per target), and returns them.
func keepOutcomes(ctx context.Context, tx *sql.Tx, c *Claim, seq uint64, cp Checkpoint) ([]TargetOutcome, error) {
	if cp.Outcomes == nil {
		return nil, nil
	}
	outs := cp.Outcomes()
	if cp.keepNone {
		return outs, nil // listed for the fenced-holder counts all the same
	}
	return outs, outcome.Keep(ctx, tx, outcome.Holder{BroadcastID: c.BroadcastID, Seq: uint64(c.Seq), Epoch: c.Epoch, CkptSeq: seq}, outs)
}

// KeepNoOutcomes makes s keep no target's outcome (PUSHFAN_OUTCOME_RETENTION
// =0): checkpoints and plan steps write no target_outcomes rows, so a user's
// deliveries and a broadcast's export find none; the counters are as ever.
func (s *Store) KeepNoOutcomes() { s.keepNone = true }
