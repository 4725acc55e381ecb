package repository

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"pushfan/internal/platform/clock"
	"pushfan/internal/platform/sqldb"
)

// keyKind is the Go type a key column scans into and is passed back as.
type keyKind int

const (
	keyUint   keyKind = iota
	keyString         // utf8mb4
	keyASCII          // a string in CHARACTER SET ascii
	keyTime
)

// sqlType is the kind's column type in the keys' JSON_TABLE: the type
// (and character set) of the table's column, so that the join is a
// look-up of the whole key.
func (k keyKind) sqlType() string {
	switch k {
	case keyString:
		return "VARCHAR(255) CHARACTER SET utf8mb4"
	case keyASCII:
		return "VARCHAR(255) CHARACTER SET ascii"
	case keyTime:
		return "DATETIME(6)"
	default:
		return "BIGINT UNSIGNED"
	}
}

type keyCol struct {
	name string
	kind keyKind
}

// purgedTable is a table with rows per broadcast that retention deletes
// with the broadcast. key is its primary key, in order; either it starts
// with broadcast_id, or it is id alone and an index (broadcast_id, …)
// finds a broadcast's rows (InnoDB appends the primary key to it, so the
// index is ordered by (broadcast_id, id)), named by index. keep, if
// set, is a condition the rows deleted must meet.
type purgedTable struct {
	name  string
	key   []keyCol
	index string // the index that finds a broadcast's rows
	keep  string
}

var (
	uintKey = func(name string) keyCol { return keyCol{name, keyUint} }
	bid     = uintKey("broadcast_id")
)

// targetOutcomesKey is target_outcomes' primary key (lease, outcomes.go).
var targetOutcomesKey = []keyCol{bid, uintKey("seq"), uintKey("epoch"), uintKey("ckpt_seq"), uintKey("part")}

// canceledRestsKey is canceled_rests' primary key (lease/outcome, rest.go).
var canceledRestsKey = []keyCol{bid, uintKey("seq")}

// bigPurged are the tables whose rows per broadcast can be many: they
// are deleted before the broadcast's transaction, a batch per statement,
// each a transaction of its own.
var bigPurged = []purgedTable{
	{name: "broadcast_failures", key: []keyCol{uintKey("id")}, index: "idx_broadcast_failures_broadcast_id"},
	{name: "engagement_events", key: []keyCol{bid, uintKey("target_id"), uintKey("type")}},
	{name: "engagement_series", key: []keyCol{bid, uintKey("type"), {"minute", keyTime}}},
	{name: "send_rate", key: []keyCol{bid, {"at", keyTime}}},
	{name: "broadcast_chunks", key: []keyCol{bid, uintKey("seq")}},
	{name: "fenced_sends", key: []keyCol{bid, uintKey("seq"), uintKey("epoch"), uintKey("ckpt_seq")}},
	{name: "target_outcomes", key: targetOutcomesKey},
	{name: "canceled_rests", key: canceledRestsKey},
	// Webhooks delivered (or given up) go with their broadcast; one
	// still waiting stays until it is delivered or expires.
	{name: "webhook_outbox", key: []keyCol{uintKey("id")}, index: "ix_webhook_broadcast", keep: "t.status <> 'pending'"},
}

// smallPurged are the tables with a few rows per broadcast, deleted in
// the broadcast's transaction only (besides what is left of bigPurged).
// broadcast_errors and engagement_counts are read by the archive first.
var smallPurged = []purgedTable{
	{name: "broadcast_errors", key: []keyCol{bid, {"code", keyString}}},
	{name: "broadcast_variants", key: []keyCol{bid, {"variant", keyASCII}}},
	// A late holder that never reported (it died) is forgotten with its
	// broadcast; its targets stay counted canceled.
	{name: "late_holders", key: []keyCol{bid, uintKey("seq")}},
	{name: "engagement_counts", key: []keyCol{bid, uintKey("variant"), uintKey("localized"), uintKey("type")}},
	{name: "engagement_open_delays", key: []keyCol{bid, uintKey("bucket")}},
	{name: "engagement_platform_counts", key: []keyCol{bid, uintKey("platform"), uintKey("type")}},
}

// readIndex is the index hint that makes a read of t's keys a range of
// the broadcast's rows, in key order: the optimizer picks another index
// of broadcast_failures (by token) and sorts all of a broadcast's rows
// for every batch.
func (t purgedTable) readIndex() string {
	if t.index == "" {
		return " FORCE INDEX (PRIMARY)"
	}
	return " FORCE INDEX (" + t.index + ")"
}

// purgeRows deletes t's rows of the broadcasts ids, a batch at a time: it
// reads a batch of their primary keys with a plain read (which locks
// nothing: a consistent read, on the range of the key prefix, or of the
// broadcast_id index, that ids select), then deletes exactly those keys.
// A statement that deleted "WHERE broadcast_id IN (…)" would lock the gap
// after each broadcast's last row up to the next broadcast's first
// (REPEATABLE READ's next-key locks), so a running broadcast inserting a
// row there would wait for it; a delete by whole keys locks the rows it
// deletes and nothing else (deleteKeys). Between batches it sleeps pause,
// or as long as the batch took if longer; q is the pool, or the
// broadcasts' transaction (pause 0).
func purgeRows(ctx context.Context, q execer, t purgedTable, ids []uint64, pause time.Duration) (int64, error) {
	var total int64
	var last []any
	for {
		began := time.Now()
		query, args := readKeysQuery(t, ids, last)
		keys, err := scanKeys(ctx, q, t.key, query, args...)
		if err != nil {
			return total, fmt.Errorf("purge %s: read keys: %w", t.name, err)
		}
		if len(keys) == 0 {
			return total, nil
		}
		del, dargs, err := deleteKeys(t, keys)
		if err != nil {
			return total, fmt.Errorf("purge %s: %w", t.name, err)
		}
		res, err := q.ExecContext(ctx, del, dargs...)
		if err != nil {
			return total, fmt.Errorf("purge %s: %w", t.name, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("purge %s: %w", t.name, err)
		}
		total += n
		if len(keys) < purgeRowBatch {
			return total, nil
		}
		last = keys[len(keys)-1]
		if pause > 0 {
			// At least as long as the batch took: on a busy server,
			// the purge takes at most half of one connection's time
			// from the running broadcasts.
			if err := clock.Sleep(ctx, max(pause, time.Since(began))); err != nil {
				return total, err
			}
		}
	}
}

// readKeysQuery is the plain read of the next purgeRowBatch keys of t's
// rows of the broadcasts ids, after the key last (nil: from the first).
func readKeysQuery(t purgedTable, ids []uint64, last []any) (string, []any) {
	cols := make([]string, len(t.key))
	for i, c := range t.key {
		cols[i] = c.name
	}
	list := strings.Join(cols, ", ")
	args := make([]any, 0, len(ids)+len(cols)*len(cols)+1)
	for _, id := range ids {
		args = append(args, id)
	}
	query := "SELECT " + list + " FROM " + t.name + " AS t" + t.readIndex() + " WHERE broadcast_id IN (" + sqldb.InList(len(ids)) + ")"
	if last != nil {
		cond, cargs := sqldb.KeyAfter(cols, last)
		query += " AND " + cond
		args = append(args, cargs...)
	}
	if t.keep != "" {
		query += " AND " + t.keep
	}
	return query + " ORDER BY " + list + " LIMIT ?", append(args, purgeRowBatch)
}

// deleteKeys is the statement that deletes t's rows of keys, and its
// arguments: a join of the keys (a JSON_TABLE of them, one row per key)
// to the table by its whole primary key, in that order (STRAIGHT_JOIN):
// a look-up per key (eq_ref), which locks that row only. "WHERE (key)
// IN (…)" leaves the plan to the optimizer, which picks a scan of a
// small table, or a range of another index on broadcast_id (then its
// next-key locks hold the gap before a running broadcast's rows),
// whatever the index hints; and MariaDB turns an IN list of 1,000
// values or more into a join that scans the table. A JSON_TABLE is one
// argument whatever the batch (MariaDB 10.6+, MySQL 8.0.4+), and costs
// the server a quarter of a UNION ALL of one SELECT per key.
func deleteKeys(t purgedTable, keys [][]any) (string, []any, error) {
	join, args, err := joinKeys(t, keys)
	if err != nil {
		return "", nil, err
	}
	q := "DELETE t FROM " + join
	if t.keep != "" {
		q += " AND " + t.keep
	}
	return q, args, nil
}

// lockKeys is the locking read of t's rows of keys that meet cond (more
// arguments follow for it), as deleteKeys: a look-up of each key.
func lockKeys(t purgedTable, keys [][]any, cond string) (string, []any, error) {
	join, args, err := joinKeys(t, keys)
	if err != nil {
		return "", nil, err
	}
	return "SELECT t." + t.key[0].name + " FROM " + join + " WHERE " + cond + " FOR UPDATE", args, nil
}

// broadcastsTable is the broadcasts, locked and deleted by their key.
var broadcastsTable = purgedTable{name: "broadcasts", key: []keyCol{uintKey("id")}}

// joinKeys is "JSON_TABLE(keys) AS k STRAIGHT_JOIN t ON (whole key)".
func joinKeys(t purgedTable, keys [][]any) (string, []any, error) {
	rows := make([][]any, len(keys))
	for i, k := range keys {
		row := make([]any, len(k))
		for j, v := range k {
			if tv, ok := v.(time.Time); ok {
				v = tv.UTC().Format("2006-01-02 15:04:05.999999")
			}
			row[j] = v
		}
		rows[i] = row
	}
	doc, err := json.Marshal(rows)
	if err != nil {
		return "", nil, err
	}
	var b strings.Builder
	b.WriteString("JSON_TABLE(?, '$[*]' COLUMNS (")
	for j, c := range t.key {
		if j > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "k%d %s PATH '$[%d]'", j, c.kind.sqlType(), j)
	}
	b.WriteString(")) AS k STRAIGHT_JOIN " + t.name + " AS t FORCE INDEX (PRIMARY) ON ")
	for j, c := range t.key {
		if j > 0 {
			b.WriteString(" AND ")
		}
		fmt.Fprintf(&b, "t.%s = k.k%d", c.name, j)
	}
	return b.String(), []any{string(doc)}, nil
}

// scanKeys reads rows of the key columns cols.
func scanKeys(ctx context.Context, q execer, cols []keyCol, query string, args ...any) ([][]any, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		ptrs := make([]any, len(cols))
		for i, c := range cols {
			switch c.kind {
			case keyString, keyASCII:
				ptrs[i] = new(string)
			case keyTime:
				ptrs[i] = new(time.Time)
			default:
				ptrs[i] = new(uint64)
			}
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		key := make([]any, len(cols))
		for i, p := range ptrs {
			switch v := p.(type) {
			case *string:
				key[i] = *v
			case *time.Time:
				key[i] = *v
			case *uint64:
				key[i] = *v
			}
		}
		out = append(out, key)
	}
	return out, rows.Err()
}
