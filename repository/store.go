// Package repository is pushfan's MySQL storage, one file per entity:
//
//   - broadcasts.go: the broadcast rows (submit with their chunks, promote
//     when due, read, list, delete after retention);
//   - tokens.go: the bundled users and device tokens (audience paging,
//     counting, chunk planning, dead-token invalidation);
//   - schema.go, schemacheck.go, writeback.go: the same audiences over a
//     deployment's own tables (the YAML schema: mapping), its start-up
//     check, and dead tokens written back by its on_dead;
//   - failures.go: the failed targets of a broadcast;
//   - cronfires.go: jobs' fires and skipped fires;
//   - stats.go: totals across broadcasts, and the archive of deleted ones;
//   - migrate.go: the embedded goose migrations.
//
// Chunks and leases are package lease's. The Store runs on a pool opened
// by sqldb.Open; the types it reads and writes are package model's.
//
// It targets MariaDB 10.6+ and MySQL 8.0+ through go-sql-driver/mysql and
// sqlx. Every query takes a context; every time is stored and returned in UTC
// with microsecond precision (DATETIME(6)).
package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"pushfan/internal/platform/sqldb"

	"github.com/jmoiron/sqlx"
)

// ErrNotFound is returned (wrapped) when a row asked for by id does not exist.
var ErrNotFound = errors.New("not found")

// Store is the MySQL-backed repository. It is safe for concurrent use.
type Store struct {
	db     *sqlx.DB
	log    *slog.Logger
	schema *Schema            // the users and tokens tables the built-in audiences read
	apps   map[string]*Schema // per app, when apps have tables of their own (WithApps)
	// walk chooses the index of an "all" walk for the app of a Store
	// reading one app of the bundled table (ForApp); nil otherwise.
	walk *appWalk
}

// New returns a Store on db, a pool opened by sqldb.Open (and migrated by
// Migrate). The pool is the caller's: it closes it.
func New(db *sqlx.DB, log *slog.Logger) *Store {
	return &Store{db: db, log: sqldb.OrDiscard(log), schema: BundledSchema()}
}

// WithSchema returns a Store whose built-in audiences, test sends and
// dead-token write-back use the tables of sc (CompileSchema, then Check)
// instead of the bundled ones. pushfan's own tables stay where they are.
func (s *Store) WithSchema(sc *Schema) *Store {
	c := *s
	c.schema, c.walk = sc, nil
	return &c
}

// ForApp returns a Store whose built-in audiences, test sends and
// write-back read app's tokens only (Schema.ForApp): every query made for
// a broadcast goes through the Store of its app.
func (s *Store) ForApp(app string) *Store {
	if sc, ok := s.apps[app]; ok {
		return s.WithSchema(sc)
	}
	c := s.WithSchema(s.schema.ForApp(app))
	if !s.schema.mapped && app != "" {
		c.walk = &appWalk{app: app} // the bundled table: every app's tokens in one (appwalk.go)
	}
	return c
}

// WithApps returns a Store that gives each app named in schemas its own
// schema (an app's own tables, already ForApp'ed); ForApp of any other
// app reads the Store's schema for that app.
func (s *Store) WithApps(schemas map[string]*Schema) *Store {
	c := *s
	c.apps = schemas
	return &c
}

// Schema is the mapping the Store's built-in audiences read.
func (s *Store) Schema() *Schema { return s.schema }

// Ping checks that the database answers; it is meant for readiness probes.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("ping mysql: %w", err)
	}
	return nil
}

// TryLock takes the MySQL named lock name (scoped to this database) on a
// connection of its own, without waiting, and returns a release function;
// ok is false when another session holds it. The lock is the server's, so
// it serialises every instance, and it goes away if the connection dies.
func (s *Store) TryLock(ctx context.Context, name string) (release func(), ok bool, err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("lock %s: %w", name, err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT(DATABASE(), '.', ?), 0)", name).Scan(&got); err != nil {
		conn.Close()
		return nil, false, fmt.Errorf("lock %s: %w", name, err)
	}
	if got.Int64 != 1 {
		conn.Close()
		return nil, false, nil
	}
	return func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(CONCAT(DATABASE(), '.', ?))", name)
		conn.Close()
	}, true, nil
}

// IsStatementError reports an error that is the database's answer to the
// statement itself, or the store's own refusal, rather than a lost
// connection, a timeout or a lock conflict: trying again gives the same
// error (see sqldb.IsStatementError).
func IsStatementError(err error) bool { return sqldb.IsStatementError(err) }

// IsTimeLimit reports the server's error for a statement that ran past
// the limit sqldb.TimeLimited put on it.
func IsTimeLimit(err error) bool { return sqldb.IsTimeLimit(err) }
