package repository

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"pushfan/internal/platform/logging"
	"pushfan/model"
)

// targetColumns is what an audience page selects, in Target's scan order.
// The platform is read from the tokens row the page reads anyway (for
// its token): the per-platform send counts cost the page nothing.
func (sc *Schema) targetColumns() string {
	return sc.tID + ", " + sc.tUser + ", " + sc.tToken + ", " + sc.uLocale + ", " + or(sc.tPlatform, "NULL")
}

// WriteOutcomes is the package's WriteOutcomes over the Store's schema:
// with a mapping, dead tokens are written back by its on_dead statement
// in the same transaction (tx, the checkpoint's) as the failure rows.
//
// An on_dead statement that fails is rolled back alone (to a savepoint),
// so the others still run and the transaction stays whole: the answer is
// then a *WriteBackError naming every dead token whose write-back failed,
// and the caller either returns it (rolling the checkpoint back, to retry
// it) or runs the checkpoint again without those tokens. Any other error
// means the transaction itself failed.
func (s *Store) WriteOutcomes(ctx context.Context, tx *sql.Tx, fs []model.Failure, dead []Invalidation) (int64, error) {
	if !s.schema.mapped {
		return WriteOutcomes(ctx, tx, fs, dead)
	}
	if len(fs) > 0 {
		if err := insertFailures(ctx, tx, fs); err != nil {
			return 0, err
		}
	}
	return s.schema.writeBackTx(ctx, tx, dead)
}

// WriteBackError is a write-back in which on_dead failed for some dead
// tokens (a trigger refused the row, a column or a grant is gone). Each
// failed statement was rolled back to its savepoint: the transaction holds
// everything else. It does not unwrap to the driver's error, so that
// sqldb.InTx never retries it as a lock conflict: whether to try again is
// the caller's decision.
type WriteBackError struct {
	Failed []WriteBackFailure
}

// WriteBackFailure is one dead token whose on_dead failed, and why.
type WriteBackFailure struct {
	Invalidation
	Err error
}

// Error names the first failed token by its id; a token, which the
// driver's message may quote, is cut to its prefix.
func (e *WriteBackError) Error() string {
	f := e.Failed[0]
	return fmt.Sprintf("schema.tokens.on_dead failed for %d dead tokens, first for token %d: %s",
		len(e.Failed), f.TokenID, logging.RedactToken(f.Err.Error(), f.Token))
}

// writeBackSavepoint isolates on_dead statements in a checkpoint.
const writeBackSavepoint = "pushfan_writeback"

// writeBack runs on_dead once per dead token, in id order (then token
// order) so that concurrent checkpoints lock the app's rows in one order,
// and returns the rows it changed; it stops at the first failure. It is
// the write-back outside a checkpoint (a test send's, on the pool).
func (sc *Schema) writeBack(ctx context.Context, db execer, items []Invalidation) (int64, error) {
	items, err := sc.writeBackOrder(ctx, db, items)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, it := range items {
		n, err := sc.runOnDead(ctx, db, it)
		if err != nil {
			return total, fmt.Errorf("schema.tokens.on_dead for token %d: %w", it.TokenID, redactedError{err, it.Token})
		}
		total += n
	}
	return total, nil
}

// writeBackTx is writeBack inside a checkpoint's transaction, each
// failing on_dead rolled back alone (see WriteOutcomes). All statements
// run under one savepoint at first; only once one fails are they run
// again one savepoint each, so the common case costs one round trip more.
// When rolling back to the savepoint fails, the transaction is gone (a
// deadlock victim, a dropped connection): that is the error, wrapping
// on_dead's (a deadlock stays retryable).
func (sc *Schema) writeBackTx(ctx context.Context, tx *sql.Tx, items []Invalidation) (int64, error) {
	items, err := sc.writeBackOrder(ctx, tx, items)
	if err != nil || len(items) == 0 {
		return 0, err
	}
	savepoint := func() error {
		if _, err := tx.ExecContext(ctx, "SAVEPOINT "+writeBackSavepoint); err != nil {
			return fmt.Errorf("schema.tokens.on_dead: savepoint: %w", err)
		}
		return nil
	}
	// undo rolls back to the savepoint after on_dead failed for it with
	// err, and reports a failure of the transaction itself.
	undo := func(it Invalidation, err error) error {
		if ctx.Err() == nil {
			if _, rbErr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+writeBackSavepoint); rbErr == nil {
				return nil
			}
		}
		return fmt.Errorf("schema.tokens.on_dead for token %d failed and took its transaction with it: %w",
			it.TokenID, redactedError{err, it.Token})
	}
	if err := savepoint(); err != nil {
		return 0, err
	}
	var total int64
	failedOne := false
	for _, it := range items {
		n, err := sc.runOnDead(ctx, tx, it)
		if err != nil {
			if err := undo(it, err); err != nil {
				return 0, err
			}
			failedOne = true
			break
		}
		total += n
	}
	if !failedOne {
		return total, nil
	}
	total = 0
	var failed []WriteBackFailure
	for _, it := range items {
		if err := savepoint(); err != nil {
			return 0, err
		}
		n, err := sc.runOnDead(ctx, tx, it)
		if err != nil {
			if err := undo(it, err); err != nil {
				return 0, err
			}
			failed = append(failed, WriteBackFailure{Invalidation: it, Err: err})
			continue
		}
		total += n
	}
	if len(failed) > 0 {
		return total, &WriteBackError{Failed: failed}
	}
	return total, nil // the failure did not happen again
}

// writeBackOrder sorts items by id (then token) and drops repeats. A dead
// token found without its id (a named audience that does not select it)
// gets its id looked up in the mapped table first when on_dead needs :id;
// a token not in the table is nobody's to write back.
//
// One statement per token: on_dead is the operator's SQL, so pushfan
// cannot widen its WHERE into an IN list; the checkpoint's transaction
// batches them into one commit, and with client-side interpolation each
// is one round trip.
func (sc *Schema) writeBackOrder(ctx context.Context, db execer, items []Invalidation) ([]Invalidation, error) {
	if len(items) == 0 {
		return nil, nil
	}
	items = slices.Clone(items)
	if slices.Contains(sc.onDeadArgs, "id") {
		var err error
		if items, err = sc.resolveIDs(ctx, db, items); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(items, func(a, b Invalidation) int {
		return cmp.Or(cmp.Compare(a.TokenID, b.TokenID), cmp.Compare(a.Token, b.Token))
	})
	return slices.CompactFunc(items, func(a, b Invalidation) bool { return a.TokenID == b.TokenID && a.Token == b.Token }), nil
}

// runOnDead runs on_dead for one dead token and returns the rows it changed.
func (sc *Schema) runOnDead(ctx context.Context, db execer, it Invalidation) (int64, error) {
	args := make([]any, len(sc.onDeadArgs))
	for i, name := range sc.onDeadArgs {
		switch name {
		case "id":
			args[i] = it.TokenID
		case "token":
			args[i] = it.Token
		case "code":
			args[i] = it.Reason
		}
	}
	res, err := db.ExecContext(ctx, sc.onDead, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// redactedError is err with token cut to its prefix in its message; it
// unwraps to err.
type redactedError struct {
	err   error
	token string
}

func (e redactedError) Error() string { return logging.RedactToken(e.err.Error(), e.token) }
func (e redactedError) Unwrap() error { return e.err }

// resolveIDs fills in the mapped id of items that have only their token,
// and drops those the mapped table does not hold.
func (sc *Schema) resolveIDs(ctx context.Context, db execer, items []Invalidation) ([]Invalidation, error) {
	var missing []string
	for _, it := range items {
		if it.TokenID == 0 {
			missing = append(missing, it.Token)
		}
	}
	if len(missing) == 0 {
		return items, nil
	}
	ids := make(map[string]uint64, len(missing))
	for chunk := range slices.Chunk(missing, invalidateChunk) {
		q, args, err := sqlx.In("SELECT "+sc.tID+", "+sc.tToken+" FROM "+sc.tokensTable+" t WHERE "+sc.tToken+" IN (?)", chunk)
		if err != nil {
			return nil, fmt.Errorf("dead tokens: expand: %w", err)
		}
		if err := scanIDs(ctx, db, q, args, ids); err != nil {
			return nil, err
		}
	}
	out := items[:0]
	for _, it := range items {
		if it.TokenID == 0 {
			id, ok := ids[it.Token]
			if !ok {
				continue
			}
			it.TokenID = id
		}
		out = append(out, it)
	}
	return out, nil
}

func scanIDs(ctx context.Context, db execer, q string, args []any, into map[string]uint64) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("dead tokens: look up their ids: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uint64
		var tok string
		if err := rows.Scan(&id, &tok); err != nil {
			return fmt.Errorf("dead tokens: look up their ids: %w", err)
		}
		into[tok] = id
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dead tokens: look up their ids: %w", err)
	}
	return nil
}

// enabledValue is the users condition as a 0/1 column (a test send tells
// a disabled user apart); a NULL condition is false, as in a WHERE.
func (sc *Schema) enabledValue() string {
	if !sc.mapped {
		return "u.push_enabled"
	}
	return "COALESCE(" + sc.enabled + ", 0)"
}

// invalidValue is 1 for a token the valid condition excludes.
func (sc *Schema) invalidValue() string {
	if !sc.mapped {
		return "t.invalidated_at IS NOT NULL"
	}
	return "NOT COALESCE(" + sc.valid + ", 0)"
}
