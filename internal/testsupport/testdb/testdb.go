// Package testdb gives each test its own freshly migrated MariaDB/MySQL
// database, so tests can run in parallel against one server without seeing
// each other's rows.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"pushfan/internal/platform/sqldb"
	"pushfan/repository"
)

// EnvDSN names the environment variable holding the server DSN; its database
// part is ignored.
const EnvDSN = "PUSHFAN_TEST_MYSQL_DSN"

// DefaultDSN is used when EnvDSN is unset: the local MariaDB that
// scripts/ensure-mysql.sh starts.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/?parseTime=true"

// dbPrefix marks databases made by this package, so a crashed run's leftovers
// are recognizable (and safe to drop by hand).
const dbPrefix = "pushfan_t_"

// setupTimeout bounds connecting, creating and migrating.
const setupTimeout = 30 * time.Second

// DB is a test's own database: a Store on it, the pool under the Store (for
// fixtures the Store has no method for), and its DSN (for starting
// processes against it).
type DB struct {
	Store *repository.Store
	SQL   *sqlx.DB
	DSN   string
}

// New creates a database named pushfan_t_<random hex> on the server given by
// PUSHFAN_TEST_MYSQL_DSN, migrated: a copy of a template migrated once
// per version of the migrations (template.go). The pool is closed and the
// database dropped when the test ends. An unreachable server fails the
// test, never skips it: CI must not go green without a database.
func New(t testing.TB) *DB {
	t.Helper()
	return create(t, 0)
}

// NewAt is New with the database migrated up to version only: the schema
// of an older release, for upgrade tests. Migrate it the rest of the way
// with repository.Migrate (or by starting pushfan serve on its DSN).
func NewAt(t testing.TB, version int64) *DB {
	t.Helper()
	return create(t, version)
}

// create makes and migrates the database: to the latest version when
// version is 0, else up to version.
func create(t testing.TB, version int64) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	serverDSN := os.Getenv(EnvDSN)
	if serverDSN == "" {
		serverDSN = DefaultDSN
	}
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		t.Fatalf("testdb: %s is not a valid DSN: %v", EnvDSN, err)
	}
	cfg.DBName = ""
	cfg.ParseTime = true
	server := cfg.FormatDSN()

	if err := ping(ctx, server); err != nil {
		t.Fatalf("testdb: MySQL/MariaDB at %s is unreachable: %v\n"+
			"Start it with scripts/ensure-mysql.sh (or point %s at a server).", cfg.Addr, err, EnvDSN)
	}

	name := dbPrefix + randomHex(t, 8)
	cfg.DBName = name
	dsn := cfg.FormatDSN()
	if err := sqldb.EnsureDatabase(ctx, dsn); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	// Registered before anything else can fail, so the database is dropped
	// even when migrating it does not work; cleanups run last-in first-out,
	// so this runs after the Store is closed.
	t.Cleanup(func() { drop(t, server, name) })

	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if version == 0 { // the latest schema: a copy of the template (template.go)
		tpl, err := templateName()
		if err == nil {
			err = ensureTemplate(ctx, server, tpl, log)
		}
		if err == nil {
			err = copyTemplate(ctx, server, tpl, name)
		}
		if err != nil {
			t.Fatalf("testdb: %v", err)
		}
	}
	pool, err := sqldb.Open(ctx, dsn, 8, log)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	t.Cleanup(func() {
		if err := pool.Close(); err != nil {
			t.Errorf("testdb: %v", err)
		}
	})
	if version > 0 {
		if err := repository.MigrateTo(ctx, pool.DB, version, log); err != nil {
			t.Fatalf("testdb: %v", err)
		}
	}
	return &DB{Store: repository.New(pool, log), SQL: pool, DSN: dsn}
}

func ping(ctx context.Context, dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

func drop(t testing.TB, server, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", server)
	if err != nil {
		t.Errorf("testdb: drop %s: %v", name, err)
		return
	}
	defer db.Close()
	// name is ours (prefix + hex), so quoting it in backquotes is safe.
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		t.Errorf("testdb: drop %s: %v", name, err)
	}
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("testdb: random name: %v", err)
	}
	return hex.EncodeToString(b)
}

// tWriter sends log lines to t.Log, so they show up next to the failing test
// (and only with -v otherwise).
type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
