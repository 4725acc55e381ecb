package repository_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"pushfan/internal/platform/sqldb"
	"pushfan/internal/testsupport/testdb"
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

// freshDatabase creates an empty sibling of a test database, not migrated,
// dropped when the test ends, and returns its DSN and name.
func freshDatabase(t *testing.T) (string, string) {
	t.Helper()
	cfg, err := mysql.ParseDSN(testdb.New(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName += "_m"
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
	return fresh, cfg.DBName
}

// assertMigratedOnce checks that every migration is recorded exactly once,
// and all of them (version 0 and each embedded file).
func assertMigratedOnce(t *testing.T, dsn string) {
	t.Helper()
	s, err := sqldb.Open(ctx(t), dsn, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v %v", files, err)
	}
	var rows, versions int
	if err := s.QueryRowContext(ctx(t), "SELECT COUNT(*), COUNT(DISTINCT version_id) FROM goose_db_version").Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	if rows != versions || versions != len(files)+1 {
		t.Fatalf("goose_db_version has %d rows for %d versions, want %d (version 0 and %d files), each once", rows, versions, len(files)+1, len(files))
	}
}

// Several instances starting at once all run Migrate, each with its own pool
// (one of them of a single connection); all must succeed and the schema must
// be applied once.
func TestMigrateConcurrentInstances(t *testing.T) {
	t.Parallel()
	fresh, _ := freshDatabase(t)
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
	assertMigratedOnce(t, fresh)
}

// The flake behind TestMigrateConcurrentInstances, made certain: instance A
// has created goose's version table (MySQL commits a CREATE TABLE at once)
// and is held just before inserting version 0; instance B starts then. B
// must wait for A (the migration lock, seen in the process list as a
// GET_LOCK in state "User lock"), not read the empty table and fail with
// "missing zero version migration". Both pools have one connection.
func TestMigrateWhileAnotherCreatesTheVersionTable(t *testing.T) {
	t.Parallel()
	fresh, name := freshDatabase(t)
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a := hookedDB(t, fresh, func(query string, args []driver.NamedValue) {
		if strings.HasPrefix(query, "INSERT INTO goose_db_version") && len(args) > 0 && args[0].Value == int64(0) {
			once.Do(func() {
				close(reached)
				<-release
			})
		}
	})
	aDone := make(chan error, 1)
	go func() { aDone <- repository.Migrate(ctx(t), a, nil) }()
	select {
	case <-reached:
	case err := <-aDone:
		t.Fatalf("instance A finished (%v) without inserting version 0", err)
	case <-time.After(20 * time.Second):
		t.Fatal("timed out after 20s waiting for instance A to insert version 0")
	}

	b, err := sqldb.Open(ctx(t), fresh, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bDone := make(chan error, 1)
	go func() { bDone <- repository.Migrate(ctx(t), b.DB, nil) }()
	mon, err := sqldb.Open(ctx(t), fresh, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	var bErr error
	bFinished := false
	deadline := time.Now().Add(20 * time.Second)
	for waiting := 0; waiting == 0; {
		select {
		case bErr = <-bDone:
			bFinished = true
		default:
		}
		if bFinished {
			break
		}
		if err := mon.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM information_schema.processlist WHERE db = ? AND state = 'User lock' AND info LIKE 'SELECT GET_LOCK(%'", name).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out after 20s waiting for instance B to wait for the migration lock or to finish")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if bFinished {
		t.Fatalf("instance B finished while A was creating the version table, without waiting for it: %v", bErr)
	}
	for _, w := range []struct {
		name string
		done chan error
	}{{"A", aDone}, {"B", bDone}} {
		select {
		case err := <-w.done:
			if err != nil {
				t.Fatalf("instance %s: %v", w.name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("timed out after 30s waiting for instance %s's migration", w.name)
		}
	}
	assertMigratedOnce(t, fresh)
}

// hookedDB is a pool of one connection to dsn whose statements pass through
// before first (in the caller's goroutine, so it can hold one back).
func hookedDB(t *testing.T, dsn string, before func(query string, args []driver.NamedValue)) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(hookConnector{c, before})
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

type hookConnector struct {
	driver.Connector
	before func(string, []driver.NamedValue)
}

func (h hookConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := h.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return hookConn{c, h.before}, nil
}

// hookConn forwards the optional interfaces database/sql uses, which the
// MySQL driver's connection has, calling before on each statement.
type hookConn struct {
	driver.Conn
	before func(string, []driver.NamedValue)
}

func (c hookConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.before(q, args)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c hookConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.before(q, args)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c hookConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.before(q, nil)
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (c hookConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c hookConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (c hookConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c hookConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }
