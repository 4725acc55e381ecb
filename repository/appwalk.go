package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// An "all" audience is walked in token id order, page by page (a plan's
// steps, a chunk's pages). In the bundled device_tokens every app's tokens
// share one id sequence, so the walk of one app has two ways through the
// table, and which is right depends on the app's share of it:
//
//   - the primary key, keeping the app's rows: one read per row of the
//     range, whoever's it is. Right for an app that holds most of the
//     table (a single-app deployment holds all of it): the app index
//     would cost a second lookup for nearly every row (25 % more database
//     time on a walk of 1M tokens, measured);
//   - idx_device_tokens_app (app, id), migration 00024: the app's own
//     rows only, in id order, each looked up in the primary key. Right
//     for a small app: 3,000 tokens beside 297,000 of another app read
//     3,000 rows instead of 300,000.
//
// MariaDB's optimizer weighs the two by its statistics and changes its mind
// between ranges and between runs (it took the app index for an app holding
// 99 % of the table), so the walk names its index: the app index when the
// app holds less than half of the table, by the optimizer's own estimates
// (two index dives, no rows read), taken again every walkCheckEvery.

// walkCheckEvery is how long an app's choice of walk holds: an app's
// share of the table moves by imports and sign-ups, not within minutes.
const walkCheckEvery = 10 * time.Minute

// appWalk chooses the index of one app's walks over the shared bundled
// table. It is shared by the copies of the app's Store (a pointer).
type appWalk struct {
	app   string
	mu    sync.Mutex
	at    time.Time // of the last estimate, zero before the first
	small bool      // the app holds under half of the table: walk the app index
	// failed is when an estimate last failed: the next is tried
	// walkRetryAfter later, not at every page of a database outage.
	failed time.Time
}

// walkRetryAfter is how soon a failed estimate is tried again.
const walkRetryAfter = 10 * time.Second

// errNoEstimate: an estimate failed less than walkRetryAfter ago and none
// was ever made.
var errNoEstimate = errors.New("the app's share of device_tokens is not known yet")

// walkHints are the two FROM clauses of a bundled "all" walk: by the app
// index, and by the primary key alone.
const (
	appIndexHint = " FORCE INDEX (idx_device_tokens_app)"
	pkOnlyHint   = " IGNORE INDEX (idx_device_tokens_app)"
)

// walkFrom is the FROM clause of an "all" walk of the Store's app: the
// schema's, with the bundled table's index named when the Store reads one
// app of it. An error estimating the share leaves the choice to the
// optimizer for this page (the walk is right either way, only slower).
func (s *Store) walkFrom(ctx context.Context) string {
	sc := s.schema
	if s.walk == nil {
		return sc.from
	}
	small, err := s.walk.smallApp(ctx, s.db.DB)
	if err != nil {
		if !errors.Is(err, errNoEstimate) {
			s.log.WarnContext(ctx, "estimating the app's share of device_tokens; the optimizer chooses the walk", "app", s.walk.app, "err", err)
		}
		return sc.from
	}
	hint := pkOnlyHint
	if small {
		hint = appIndexHint
	}
	return sc.tokensTable + " t" + hint + " JOIN " + sc.usersTable + " u ON " + sc.uID + " = " + sc.tUser
}

// smallApp reports whether w's app holds less than half of device_tokens,
// from the optimizer's estimates of the rows of its range in the app index
// and of the table's rows in the primary key.
func (w *appWalk) smallApp(ctx context.Context, db *sql.DB) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.at.IsZero() && time.Since(w.at) < walkCheckEvery || time.Since(w.failed) < walkRetryAfter {
		if w.at.IsZero() {
			return false, errNoEstimate
		}
		return w.small, nil // the last estimate, until the next one is due or can be made
	}
	app, err := explainRows(ctx, db, "EXPLAIN SELECT id FROM device_tokens FORCE INDEX (idx_device_tokens_app) WHERE app = ?", w.app)
	var all int64
	if err == nil {
		all, err = explainRows(ctx, db, "EXPLAIN SELECT id FROM device_tokens FORCE INDEX (PRIMARY) WHERE id > 0")
	}
	if err != nil {
		w.failed = time.Now()
		return false, err
	}
	w.small, w.at = 2*app < all, time.Now()
	return w.small, nil
}

// explainRows is the rows column of EXPLAIN's first row: the optimizer's
// estimate, from index dives, of the rows a statement reads.
func explainRows(ctx context.Context, db *sql.DB, q string, args ...any) (int64, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("explain: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, fmt.Errorf("explain: %w", err)
	}
	if !rows.Next() {
		return 0, fmt.Errorf("explain: no row: %w", rows.Err())
	}
	vals := make([]sql.NullInt64, len(cols))
	ptrs := make([]any, len(cols))
	var n int64 = -1
	for i, c := range cols {
		if c == "rows" {
			ptrs[i] = &vals[i]
		} else {
			ptrs[i] = new(sql.RawBytes)
		}
	}
	if err := rows.Scan(ptrs...); err != nil {
		return 0, fmt.Errorf("explain: %w", err)
	}
	for i, c := range cols {
		if c == "rows" {
			n = vals[i].Int64
		}
	}
	if n < 0 {
		return 0, fmt.Errorf("explain: no rows column in %v", cols)
	}
	return n, nil
}
