package repository_test

import (
	"testing"

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
