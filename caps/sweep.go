package caps

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"pushfan/internal/platform/sqldb"
)

// sweepBatch is how many rows one retention statement deletes: small, so
// that it never holds locks a reservation waits on for long.
const sweepBatch = 1000

// dueBatch is how many of the ledger's broadcasts one look-up checks for
// having ended.
const dueBatch = 100

// keyedTable is a table of the ledger whose primary key starts with the
// broadcast: rest are the key's other columns, in order.
type keyedTable struct {
	name string
	rest []string
}

// sweptTables are the ledger's rows of one broadcast.
var sweptTables = []keyedTable{
	{"frequency_users", []string{"user_id"}},
	{"frequency_holds", []string{"user_id", "chunk"}},
	{"frequency_shares", []string{"user_id"}},
}

// Sweep deletes what the ledger no longer needs: slots that expired
// before expiredBefore (free anyway: deleting them only keeps the table
// small) and the answers, holds and shares of broadcasts that ended
// before finishedBefore (no device of theirs is read again). It returns the rows
// deleted.
//
// A running broadcast writes its answers and holds throughout, at every
// page and checkpoint, so the sweep never reads nor locks one of its
// rows: it walks the broadcasts present in each table (an index dive
// each), asks which of them ended, a batch at a time, and deletes each
// ended one's rows by their whole primary key, a batch of keys read at a
// time (a key locks its row only: no range, no gap beside a running
// broadcast's rows).
func (l *Ledger) Sweep(ctx context.Context, expiredBefore, finishedBefore time.Time) (int64, error) {
	total, err := l.sweepSlots(ctx, expiredBefore)
	if err != nil {
		return total, err
	}
	for _, t := range sweptTables {
		n, err := l.sweepTable(ctx, t, finishedBefore.UTC())
		total += n
		if err != nil {
			return total, fmt.Errorf("delete finished broadcasts' %s: %w", t.name, err)
		}
	}
	return total, nil
}

// sweepSlots deletes the slots that expired before before, a batch at a
// time (a range of the expiry index: live slots are past its end).
func (l *Ledger) sweepSlots(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		res, err := l.db.ExecContext(ctx, "DELETE FROM frequency_slots WHERE expires_at < ? LIMIT ?", before.UTC(), sweepBatch)
		if err != nil {
			return total, fmt.Errorf("delete expired frequency slots: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("delete expired frequency slots: %w", err)
		}
		total += n
		if n < sweepBatch {
			return total, nil
		}
	}
}

// sweepTable deletes t's rows of the broadcasts that ended before before.
func (l *Ledger) sweepTable(ctx context.Context, t keyedTable, before time.Time) (int64, error) {
	var total int64
	var after uint64
	for {
		ids, err := l.present(ctx, t, after)
		if err != nil || len(ids) == 0 {
			return total, err
		}
		after = ids[len(ids)-1]
		due, err := l.ended(ctx, ids, before)
		if err != nil {
			return total, err
		}
		for _, b := range due {
			n, err := l.deleteRows(ctx, t, b)
			total += n
			if err != nil {
				return total, err
			}
		}
	}
}

// present reads up to dueBatch broadcasts with rows in t, above after:
// one index dive each (a loose scan: never a row of a broadcast besides
// its first).
func (l *Ledger) present(ctx context.Context, t keyedTable, after uint64) ([]uint64, error) {
	var ids []uint64
	for len(ids) < dueBatch {
		var b uint64
		err := l.db.QueryRowContext(ctx, "SELECT broadcast_id FROM "+t.name+" WHERE broadcast_id > ? ORDER BY broadcast_id LIMIT 1", after).Scan(&b)
		if err == sql.ErrNoRows {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list the ledger's broadcasts: %w", err)
		}
		ids = append(ids, b)
		after = b
	}
	return ids, nil
}

// ended returns those of ids that ended before before.
func (l *Ledger) ended(ctx context.Context, ids []uint64, before time.Time) ([]uint64, error) {
	args := make([]any, 0, len(ids)+1)
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, before)
	rows, err := l.db.QueryContext(ctx, `SELECT id FROM broadcasts WHERE id IN (`+sqldb.InList(len(ids))+`)
		AND status IN ('completed', 'canceled', 'failed') AND finished_at < ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("read which broadcasts ended: %w", err)
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("read which broadcasts ended: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read which broadcasts ended: %w", err)
	}
	return out, nil
}

// deleteRows deletes t's rows of broadcast b: it reads a batch of their
// keys (a plain read, which locks nothing), from after the last batch's,
// then deletes those keys.
func (l *Ledger) deleteRows(ctx context.Context, t keyedTable, b uint64) (int64, error) {
	cols := strings.Join(t.rest, ", ")
	var total int64
	var last []any // the last key read, after broadcast_id
	for {
		query := "SELECT " + cols + " FROM " + t.name + " WHERE broadcast_id = ?"
		args := []any{b}
		if last != nil {
			cond, cargs := sqldb.KeyAfter(t.rest, last)
			query += " AND " + cond
			args = append(args, cargs...)
		}
		keys, err := readKeys(ctx, l.db, query+" ORDER BY "+cols+" LIMIT ?", len(t.rest), append(args, sweepBatch)...)
		if err != nil {
			return total, err
		}
		if len(keys) == 0 {
			return total, nil
		}
		del := "DELETE FROM " + t.name + " WHERE broadcast_id = ? AND (" + cols + ") IN (" + sqldb.Placeholders(len(keys), len(t.rest)) + ")"
		dargs := []any{b}
		for _, k := range keys {
			dargs = append(dargs, k...)
		}
		res, err := l.db.ExecContext(ctx, del, dargs...)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += n
		if len(keys) < sweepBatch {
			return total, nil
		}
		last = keys[len(keys)-1]
	}
}

// readKeys reads rows of n unsigned columns.
func readKeys(ctx context.Context, db *sql.DB, query string, n int, args ...any) ([][]any, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals := make([]uint64, n)
		ptrs := make([]any, n)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		key := make([]any, n)
		for i, v := range vals {
			key[i] = v
		}
		out = append(out, key)
	}
	return out, rows.Err()
}
