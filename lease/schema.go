package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pushfan/internal/platform/sqldb"
)

// ErrOutdated: a release built for a newer schema has begun to migrate the
// database (the schema fence is above this release's schema), so this
// instance moves no chunk or broadcast on: it would do so without the new
// schema's bookkeeping. It still stores what it sent and hands its work
// back (see Store.Checkpoint).
var ErrOutdated = errors.New("the database's schema is newer than this release's")

// SetSchema makes the store act as a release built for schema version v
// (New: repository.SchemaVersion, this build's), for the tests of an older
// release beside a newer one. Call it before the store is used.
func (s *Store) SetSchema(v int64) { s.schema = v }

// OnOutdated has the store call fn, once, the first time a transaction
// finds the schema fence above the store's schema, with both versions: the
// instance stops taking work (package broadcast). fn must not block. Call
// it before the store is used.
func (s *Store) OnOutdated(fn func(fence, schema int64)) { s.outdatedFn = fn }

// behind reads the schema fence in tx under a shared lock and reports
// whether it is above the store's schema. The lock is what makes the fence
// exact: repository.RaiseFence waits for every transaction that holds it,
// and every transaction after the raise sees the new version, so no
// transition of an older release commits once a newer release begins to
// migrate. Shared locks do not wait for each other; the fence row only
// changes when a release with a newer schema starts.
func (s *Store) behind(ctx context.Context, tx *sql.Tx) (bool, error) {
	var fence int64
	err := tx.QueryRowContext(ctx, "SELECT version FROM schema_fence WHERE id = 1 LOCK IN SHARE MODE").Scan(&fence)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil // nothing raised it yet
	case err != nil:
		return false, fmt.Errorf("read the schema fence: %w", err)
	case fence <= s.schema:
		return false, nil
	}
	s.outdatedOnce.Do(func() {
		s.log.WarnContext(ctx, "a release built for a newer schema is migrating the database, or has: this instance moves no chunk or broadcast on any more",
			"fence", fence, "schema", s.schema)
		if s.outdatedFn != nil {
			s.outdatedFn(fence, s.schema)
		}
	})
	return true, nil
}

// inTx runs fn in a transaction that moves state on: it answers
// ErrOutdated, and runs nothing, when the schema fence is above the
// store's schema (behind).
func (s *Store) inTx(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	return sqldb.InTx(ctx, s.db, s.log, what, func(tx *sql.Tx) error {
		switch old, err := s.behind(ctx, tx); {
		case err != nil:
			return err
		case old:
			return fmt.Errorf("schema fence above version %d: %w", s.schema, ErrOutdated)
		}
		return fn(tx)
	})
}
