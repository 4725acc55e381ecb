package repository_test

import (
	"context"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/repository"
)

// Migrate raises the schema fence to the schema this build was made for
// (its highest migration, where the database then is), and never lowers
// it: an older release starting on a newer database leaves it where the
// newer one put it. On the schema of a release from before the fence
// (migration 00029) there is nothing to raise.
func TestMigrateRaisesTheSchemaFence(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	db := s.DB().DB
	var version, fence int64
	if err := db.QueryRowContext(ctx(t), "SELECT MAX(version_id) FROM goose_db_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if got := repository.SchemaVersion(); got != version {
		t.Fatalf("SchemaVersion %d, the migrated database is at %d", got, version)
	}
	if err := db.QueryRowContext(ctx(t), "SELECT version FROM schema_fence WHERE id = 1").Scan(&fence); err != nil || fence != version {
		t.Fatalf("fence %d (%v) after Migrate, want %d", fence, err, version)
	}
	if err := repository.RaiseFence(ctx(t), db, version+5); err != nil {
		t.Fatal(err)
	}
	if err := repository.Migrate(ctx(t), db, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx(t), "SELECT version FROM schema_fence WHERE id = 1").Scan(&fence); err != nil || fence != version+5 {
		t.Fatalf("fence %d (%v) after an older release migrated, want it left at %d", fence, err, version+5)
	}
	old := testdb.NewAt(t, 13)
	if err := repository.RaiseFence(ctx(t), old.SQL.DB, version); err != nil {
		t.Fatalf("raising the fence on a database without one: %v", err)
	}
}

// A start of the same release (every start migrates) only reads a fence
// already at its version: a stalled instance's transition holding the
// fence row under a shared lock (a paused process) holds it up not at
// all. It waited for the lock before, up to innodb_lock_wait_timeout, and
// every later transition of every instance queued behind it.
func TestRaisingTheFenceToWhereItIsTakesNoLock(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	db := s.DB().DB
	v := repository.SchemaVersion()
	stalled, err := db.BeginTx(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Rollback()
	var fence int64
	if err := stalled.QueryRowContext(ctx(t), "SELECT version FROM schema_fence WHERE id = 1 LOCK IN SHARE MODE").Scan(&fence); err != nil {
		t.Fatal(err)
	}
	quick, cancel := context.WithTimeout(ctx(t), 5*time.Second)
	defer cancel()
	for _, to := range []int64{v, v - 1} {
		if err := repository.RaiseFence(quick, db, to); err != nil {
			t.Fatalf("raising the fence to %d (it is at %d) beside a transition in flight: %v", to, fence, err)
		}
	}
}
