package testdb_test

import (
	"database/sql"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"pushfan/internal/platform/sqldb"
	"pushfan/internal/testsupport/testdb"
	"pushfan/repository"
)

func TestNewGivesMigratedPrivateDatabaseAndDropsIt(t *testing.T) {
	var dbName string
	t.Run("use", func(t *testing.T) {
		d1, d2 := testdb.New(t), testdb.New(t)
		dsn, dsn2 := d1.DSN, d2.DSN
		if dsn == dsn2 {
			t.Fatal("two calls returned the same database")
		}
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		dbName = cfg.DBName
		if !strings.HasPrefix(dbName, "pushfan_t_") || !cfg.ParseTime {
			t.Fatalf("dsn %q: want a pushfan_t_ database with parseTime", dsn)
		}
		// Migrated: the schema is there, and the databases are separate.
		if _, err := d1.SQL.ExecContext(t.Context(), "INSERT INTO users (id) VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := d2.SQL.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM users").Scan(&n); err != nil || n != 0 {
			t.Fatalf("second database sees %d users (%v)", n, err)
		}
		// The DSN works for another process (here: another pool).
		other, err := sqldb.Open(t.Context(), dsn, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if err := other.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM users").Scan(&n); err != nil || n != 1 {
			t.Fatalf("via returned DSN: %d users (%v)", n, err)
		}
	})
	db, err := sql.Open("mysql", testdb.DefaultDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var found string
	err = db.QueryRowContext(t.Context(), "SELECT schema_name FROM information_schema.schemata WHERE schema_name = ?", dbName).Scan(&found)
	if err != sql.ErrNoRows {
		t.Fatalf("database %s still exists after the test (err %v)", dbName, err)
	}
}

// fatalTB records Fatalf and ends the goroutine the way testing.T does.
type fatalTB struct {
	testing.TB
	msg string // written before Goexit, read after the goroutine is done
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = format
	runtime.Goexit()
}

func TestNewFailsLoudlyWhenServerIsDown(t *testing.T) {
	t.Setenv(testdb.EnvDSN, "root@tcp(127.0.0.1:1)/?timeout=1s")
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		testdb.New(f)
		t.Error("New returned without failing")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // New's ping gives up after 5 s
		t.Fatal("timed out after 30s waiting for New to fail against a server that is down")
	}
	if !strings.Contains(f.msg, "scripts/ensure-mysql.sh") {
		t.Fatalf("failure message %q does not say how to start MariaDB", f.msg)
	}
}

// NewAt stops at the version asked for: the schema of an older release,
// which repository.Migrate then takes the rest of the way.
func TestNewAtStopsAtTheVersion(t *testing.T) {
	d := testdb.NewAt(t, 3)
	var version int64
	if err := d.SQL.QueryRowContext(t.Context(), "SELECT MAX(version_id) FROM goose_db_version WHERE is_applied").Scan(&version); err != nil || version != 3 {
		t.Fatalf("schema version %d (%v), want 3", version, err)
	}
	if _, err := d.SQL.ExecContext(t.Context(), "SELECT 1 FROM broadcast_chunks LIMIT 0"); err == nil {
		t.Fatal("broadcast_chunks (migration 4) exists at version 3")
	}
	if err := repository.Migrate(t.Context(), d.SQL.DB, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.SQL.ExecContext(t.Context(), "SELECT app FROM device_tokens LIMIT 0"); err != nil {
		t.Fatalf("after Migrate: %v", err)
	}
}

// A copy of the template is the schema the migrations make: every table's
// CREATE statement, its row count, and no view, trigger, routine or event
// in either (a migration that made one would need the copy to carry it).
func TestACopyIsTheMigratedSchema(t *testing.T) {
	copied, migrated := testdb.New(t), testdb.NewAt(t, repository.SchemaVersion())
	a, b := describe(t, copied.SQL.DB), describe(t, migrated.SQL.DB)
	if a != b {
		t.Fatalf("the copy differs from the migrated schema:\ncopy:\n%s\nmigrated:\n%s", a, b)
	}
	if !strings.Contains(a, "CREATE TABLE `device_tokens`") || !strings.Contains(a, "goose_db_version") {
		t.Fatalf("the description lacks the schema's tables:\n%s", a)
	}
}

var autoIncrement = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// describe is a database's schema and row counts, as text to compare.
func describe(t *testing.T, db *sql.DB) string {
	t.Helper()
	ctx := t.Context()
	var b strings.Builder
	for _, q := range []string{
		"SELECT COUNT(*) FROM information_schema.VIEWS WHERE TABLE_SCHEMA = DATABASE()",
		"SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()",
		"SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()",
		"SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = DATABASE()",
	} {
		var n int
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s: %d\n", q, n)
	}
	rows, err := db.QueryContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, s)
	}
	rows.Close()
	for _, tn := range tables {
		var name, create string
		var n int
		if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE `"+tn+"`").Scan(&name, &create); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+tn+"`").Scan(&n); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s\nrows: %d\n", autoIncrement.ReplaceAllString(create, ""), n)
	}
	return b.String()
}
