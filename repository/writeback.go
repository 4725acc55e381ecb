package repository

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"pushfan/model"
)

// targetColumns is what an audience page selects, in Target's scan order.
func (sc *Schema) targetColumns() string {
	return sc.tID + ", " + sc.tUser + ", " + sc.tToken + ", " + sc.uLocale
}

// WriteOutcomes is the package's WriteOutcomes over the Store's schema:
// with a mapping, dead tokens are written back by its on_dead statement
// in the same transaction (tx, the checkpoint's) as the failure rows.
func (s *Store) WriteOutcomes(ctx context.Context, tx *sql.Tx, fs []model.Failure, dead []Invalidation) (int64, error) {
	if !s.schema.mapped {
		return WriteOutcomes(ctx, tx, fs, dead)
	}
	if len(fs) > 0 {
		if err := insertFailures(ctx, tx, fs); err != nil {
			return 0, err
		}
	}
	return s.schema.writeBack(ctx, tx, dead)
}

// writeBack runs on_dead once per dead token, in id order (then token
// order) so that concurrent checkpoints lock the app's rows in one order,
// and returns the rows it changed. A dead token found without its id (a
// named audience that does not select it) gets its id looked up in the
// mapped table first when on_dead needs :id; a token not in the table is
// nobody's to write back.
//
// One statement per token: on_dead is the operator's SQL, so pushfan
// cannot widen its WHERE into an IN list; the checkpoint's transaction
// batches them into one commit, and with client-side interpolation each
// is one round trip.
func (sc *Schema) writeBack(ctx context.Context, db execer, items []Invalidation) (int64, error) {
	if len(items) == 0 {
		return 0, nil
	}
	items = slices.Clone(items)
	if slices.Contains(sc.onDeadArgs, "id") {
		var err error
		if items, err = sc.resolveIDs(ctx, db, items); err != nil {
			return 0, err
		}
	}
	slices.SortFunc(items, func(a, b Invalidation) int {
		return cmp.Or(cmp.Compare(a.TokenID, b.TokenID), cmp.Compare(a.Token, b.Token))
	})
	items = slices.CompactFunc(items, func(a, b Invalidation) bool { return a.TokenID == b.TokenID && a.Token == b.Token })
	var total int64
	args := make([]any, len(sc.onDeadArgs))
	for _, it := range items {
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
			return total, fmt.Errorf("schema.tokens.on_dead for token %d: %w", it.TokenID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("schema.tokens.on_dead: %w", err)
		}
		total += n
	}
	return total, nil
}

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
