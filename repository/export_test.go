package repository

import (
	"context"
	"database/sql"
	"time"

	"github.com/jmoiron/sqlx"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// DB gives this package's tests the pool under s, for fixtures the Store
// has no method for. It exists only in test builds.
func (s *Store) DB() *sqlx.DB { return s.db }

// RecordFailures stores failures with one multi-row INSERT per 500 rows, all
// in one transaction (so a retried call never leaves half a batch behind).
// Messages are cut to 1024 characters on a rune boundary; a zero CreatedAt
// means "now" on the database clock. IDs are assigned by the database and not
// written back into fs.
func (s *Store) RecordFailures(ctx context.Context, fs []model.Failure) error {
	if len(fs) == 0 {
		return nil
	}
	return sqldb.InTx(ctx, s.db.DB, s.log, "record failures", func(tx *sql.Tx) error {
		return insertFailures(ctx, tx, fs)
	})
}

// AudiencePageIndex is the index MariaDB's plan for an AudiencePage of a
// over (after, upto] walks the tokens table (t) by, from EXPLAIN of the
// very statement AudiencePage runs.
func (s *Store) AudiencePageIndex(ctx context.Context, a model.Audience, after, upto uint64, limit int) (string, error) {
	q, args, empty, err := s.audiencePageQuery(ctx, a, after, upto, limit)
	if err != nil || empty {
		return "", err
	}
	rows, err := s.db.QueryxContext(ctx, "EXPLAIN "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	for rows.Next() {
		row := map[string]any{}
		if err := rows.MapScan(row); err != nil {
			return "", err
		}
		if table, _ := row["table"].([]byte); string(table) == "t" {
			key, _ := row["key"].([]byte)
			return string(key), nil
		}
	}
	return "", rows.Err()
}

// AudiencePageAccess is, by table alias, how MariaDB's plan for an
// AudiencePage reads each table ("type key extra"), from EXPLAIN of the
// very statement AudiencePage runs.
func (s *Store) AudiencePageAccess(ctx context.Context, a model.Audience, after, upto uint64, limit int) (map[string]string, error) {
	q, args, _, err := s.audiencePageQuery(ctx, a, after, upto, limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryxContext(ctx, "EXPLAIN "+q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		row := map[string]any{}
		if err := rows.MapScan(row); err != nil {
			return nil, err
		}
		table, _ := row["table"].([]byte)
		key, _ := row["key"].([]byte)
		kind, _ := row["type"].([]byte)
		extra, _ := row["Extra"].([]byte)
		out[string(table)] = string(kind) + " " + string(key) + " " + string(extra)
	}
	return out, rows.Err()
}

// PurgeInTx runs the transaction part of PurgeFinished in tx, on ids as
// they are (none of their rows deleted first), so a test can hold that
// transaction's locks open.
func PurgeInTx(ctx context.Context, tx *sql.Tx, ids []uint64, cutoff time.Time) (int, error) {
	return purgeLocked(ctx, tx, ids, cutoff)
}

// PurgeStatements returns, for each table retention deletes from, the
// read of the first batch of keys of the broadcasts ids with its
// arguments, and the delete of the keys it reads from db.
func PurgeStatements(ctx context.Context, db *sqlx.DB, ids []uint64) (map[string][2]string, map[string][2][]any, error) {
	stmts := map[string][2]string{}
	args := map[string][2][]any{}
	for _, t := range append(append([]purgedTable(nil), bigPurged...), smallPurged...) {
		read, rargs := readKeysQuery(t, ids, nil)
		keys, err := scanKeys(ctx, db, t.key, read, rargs...)
		if err != nil {
			return nil, nil, err
		}
		del, dargs, err := deleteKeys(t, keys)
		if err != nil {
			return nil, nil, err
		}
		stmts[t.name] = [2]string{read, del}
		args[t.name] = [2][]any{rargs, dargs}
	}
	return stmts, args, nil
}
