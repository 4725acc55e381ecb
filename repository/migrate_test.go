package repository_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"pushfan/internal/sqldb"
	"pushfan/internal/testdb"
	"pushfan/model"
	"pushfan/repository"
)

func TestMigrateIdempotent(t *testing.T) {
	t.Parallel()
	s := newStore(t) // already migrated once
	for range 2 {
		if err := repository.Migrate(ctx(t), s.DB().DB, nil); err != nil {
			t.Fatalf("migrate again: %v", err)
		}
	}
	var version int64
	if err := s.DB().QueryRowContext(ctx(t), "SELECT MAX(version_id) FROM goose_db_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 3 {
		t.Fatalf("schema version %d", version)
	}
}

// The schema contract: inserts naming only the contract columns work,
// because every extra column has a default.
func TestContractColumnsInsert(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	exec(t, s, "INSERT INTO users (id, push_enabled) VALUES (1, 1), (2, 0)")
	exec(t, s, "INSERT INTO users (id) VALUES (3)")
	exec(t, s, "INSERT INTO device_tokens (user_id, token, platform, invalidated_at) VALUES (1, 'a', 'android', NULL), (2, 'b', NULL, NULL), (3, 'c', 'ios', UTC_TIMESTAMP(6))")
	exec(t, s, "INSERT INTO device_tokens (user_id, token) VALUES (3, 'd')")

	var locale string
	var created time.Time
	if err := s.DB().QueryRowContext(ctx(t), "SELECT locale, created_at FROM users WHERE id = 3").Scan(&locale, &created); err != nil {
		t.Fatal(err)
	}
	if locale != "en" || time.Since(created).Abs() > time.Minute {
		t.Fatalf("defaults: locale %q, created_at %v (should be now, in UTC)", locale, created)
	}
	got := pageAll(t, s, model.Audience{All: true}, 10)
	if len(got) != 2 || got[0].Token != "a" || got[1].Token != "d" {
		t.Fatalf("audience %+v", got)
	}
	// Tokens are case-sensitive: 'A' is a different token from 'a'...
	exec(t, s, "INSERT INTO device_tokens (user_id, token) VALUES (1, 'A')")
	// ...but the same one twice is refused.
	if _, err := s.DB().ExecContext(ctx(t), "INSERT INTO device_tokens (user_id, token) VALUES (1, 'a')"); err == nil {
		t.Fatal("duplicate token accepted")
	}
}

func TestEnsureDatabaseValidatesName(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"root@tcp(127.0.0.1:3306)/",
		"root@tcp(127.0.0.1:3306)/bad-name",
		"root@tcp(127.0.0.1:3306)/x`; DROP DATABASE mysql; --",
	} {
		if err := sqldb.EnsureDatabase(ctx(t), dsn); err == nil {
			t.Errorf("EnsureDatabase(%q): want error", dsn)
		}
	}
}

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	c, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if _, err := sqldb.Open(c, "root@tcp(127.0.0.1:1)/x", 2, nil); err == nil {
		t.Fatal("want error")
	}
}

func TestPing(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	if err := s.Ping(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// Several instances starting at once all run Migrate, each with its own pool
// (one of them of a single connection); all must succeed and the schema must
// be applied once.
func TestMigrateConcurrentInstances(t *testing.T) {
	t.Parallel()
	dsn := testdb.New(t).DSN
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName += "_m" // a sibling database, not migrated yet
	fresh := cfg.FormatDSN()
	if err := sqldb.EnsureDatabase(ctx(t), fresh); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s, err := sqldb.Open(context.Background(), fresh, 1, nil)
		if err != nil {
			t.Error(err)
			return
		}
		defer s.Close()
		if _, err := s.ExecContext(context.Background(), "DROP DATABASE `"+cfg.DBName+"`"); err != nil {
			t.Error(err)
		}
	})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			s, err := sqldb.Open(ctx(t), fresh, i+1, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			if err := repository.Migrate(ctx(t), s.DB, nil); err != nil {
				t.Errorf("instance %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	s, err := sqldb.Open(ctx(t), fresh, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rows, versions int
	if err := s.QueryRowContext(ctx(t), "SELECT COUNT(*), COUNT(DISTINCT version_id) FROM goose_db_version").Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	if rows != versions {
		t.Fatalf("goose_db_version has %d rows for %d versions: a migration ran twice", rows, versions)
	}
}
