package repository

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"pushfan/internal/platform/sqldb"

	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS // read-only: embed.FS cannot be mutated

// migrateLockWait bounds how long Migrate waits for another instance that is
// migrating the same database, when ctx itself has no deadline.
const migrateLockWait = 5 * time.Minute

// Migrate applies pending migrations (goose, embedded SQL) to the database db
// is connected to, logging each version applied. It raises the schema
// fence to this build's SchemaVersion first (RaiseFence): an instance of an
// older release still running on the database then hands its work back
// rather than move it on without the new schema's bookkeeping.
//
// Several pushfan instances may start at once and all run Migrate. A MySQL
// named lock (GET_LOCK, scoped to the database name), taken on a connection
// of its own and held across the whole goose run, serializes them: the
// second one waits, then finds nothing to do. Goose's own session locker is
// not enough: it covers the migrations but not Up's first step (HasPending),
// which creates the version table and then inserts version 0 without it.
// MySQL commits a CREATE TABLE at once, so another instance could see the
// table before its version 0 and fail with "missing zero version
// migration". Goose's provider API is used so no goose package-level state
// is touched.
//
// The lock's connection is one more than goose uses, so a pool limited to
// one connection is lifted to two while Migrate runs (start-up: nothing
// else uses the pool yet) and set back after.
func Migrate(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	log = sqldb.OrDiscard(log)
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("migrations fs: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectMySQL, db, sub,
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(log), // goose logs only in verbose mode; we log results below
	)
	if err != nil {
		return fmt.Errorf("goose provider: %w", err)
	}
	if n := db.Stats().MaxOpenConnections; n == 1 {
		db.SetMaxOpenConns(2)
		defer db.SetMaxOpenConns(n)
	}
	unlock, err := lockMigrations(ctx, db, log)
	if err != nil {
		return err
	}
	defer unlock()

	// The fence first: instances of an older release stop moving state on
	// before the first migration runs (docs/operations.md, "Upgrades").
	// Raised again after, for a database that got the fence's table in this
	// run.
	if err := RaiseFence(ctx, db, SchemaVersion()); err != nil {
		return err
	}
	results, err := provider.Up(ctx)
	var perr *goose.PartialError
	if errors.As(err, &perr) {
		results = perr.Applied // the ones that did go through before the failure
	}
	for _, r := range results {
		log.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	if err != nil {
		if perr != nil && perr.Failed != nil {
			return fmt.Errorf("migrate: version %d (%s): %w", perr.Failed.Source.Version, perr.Failed.Source.Path, perr.Err)
		}
		return fmt.Errorf("migrate: %w", err)
	}
	if err := RaiseFence(ctx, db, SchemaVersion()); err != nil {
		return err
	}
	version, err := provider.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	log.Debug("schema up to date", "version", version, "applied", len(results))
	return nil
}

// lockName is the migration lock's name. Named locks are server-wide, so it
// includes the database: tests migrating their own databases in parallel do
// not wait on each other. LEFT(..., 64) because lock names are limited to 64
// characters.
const lockName = "LEFT(CONCAT('pushfan_migrate.', COALESCE(DATABASE(), '')), 64)"

// lockMigrations takes the migration lock on a connection of its own, waiting
// for another instance's migration up to ctx's deadline (migrateLockWait
// without one), and returns the function that releases it. A lock dies with
// its connection, so a crashed migrator never leaves it behind.
func lockMigrations(ctx context.Context, db *sql.DB, log *slog.Logger) (func(), error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("take migration lock: connect: %w", err)
	}
	wait := migrateLockWait
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	var got sql.NullInt64
	err = conn.QueryRowContext(ctx, "SELECT GET_LOCK("+lockName+", 0)").Scan(&got)
	if err == nil && got.Valid && got.Int64 != 1 {
		log.Info("another instance is migrating the database; waiting for it", "up_to", wait.Round(time.Second))
		err = conn.QueryRowContext(ctx, "SELECT GET_LOCK("+lockName+", ?)", max(1, int(wait.Seconds()))).Scan(&got)
	}
	switch {
	case err != nil:
		discard(conn)
		return nil, fmt.Errorf("take migration lock: %w", err)
	case !got.Valid || got.Int64 != 1:
		discard(conn)
		return nil, fmt.Errorf("take migration lock: another instance held it for %s", wait.Round(time.Second))
	}
	return func() {
		// Detached: ctx may be canceled by now, and the lock must go.
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK("+lockName+")"); err != nil {
			log.Warn("release migration lock: closing its connection instead", "err", err)
			discard(conn)
			return
		}
		_ = conn.Close()
	}, nil
}

// discard closes conn's connection rather than returning it to the pool: a
// connection that may hold the migration lock must not be reused.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// MigrationsDigest is a digest of the embedded migrations, names and
// contents: two builds with the same digest make the same schema. Test
// support keys a migrated template database by it, so that a changed
// migration (even one edited in place during development) is never
// served from a template made by the old one.
func MigrationsDigest() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrationFiles, "migrations", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := migrationFiles.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("migrations digest: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
