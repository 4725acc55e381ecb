package repository

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"pushfan/internal/sqldb"

	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS // read-only: embed.FS cannot be mutated

// migrateLockWait bounds how long Migrate waits for another instance that is
// migrating the same database, when ctx itself has no deadline.
const migrateLockWait = 5 * time.Minute

// Migrate applies pending migrations (goose, embedded SQL) to the database db
// is connected to, logging each version applied.
//
// Several pushfan instances may start at once and all run Migrate: a MySQL
// named lock (GET_LOCK, scoped to the database name) serializes them, so the
// second one waits and then finds nothing to do. The lock is taken on the
// very connection goose migrates through, so a pool of one connection works.
// Goose's provider API is used so no goose package-level state is touched.
func Migrate(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	log = sqldb.OrDiscard(log)
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("migrations fs: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectMySQL, db, sub,
		goose.WithDisableGlobalRegistry(true),
		goose.WithSessionLocker(namedLock{}),
		goose.WithSlog(log), // goose logs only in verbose mode; we log results below
	)
	if err != nil {
		return fmt.Errorf("goose provider: %w", err)
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
	version, err := provider.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	log.Debug("schema up to date", "version", version, "applied", len(results))
	return nil
}

// namedLock is a goose session locker built on MySQL's GET_LOCK. Named locks
// are server-wide, so the name includes the database: tests migrating their
// own databases in parallel do not wait on each other. LEFT(..., 64) because
// lock names are limited to 64 characters. A lock dies with its connection,
// so a crashed migrator never leaves it behind.
type namedLock struct{}

const lockName = "LEFT(CONCAT('pushfan_migrate.', COALESCE(DATABASE(), '')), 64)"

func (namedLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	wait := migrateLockWait
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	var got sql.NullInt64
	err := conn.QueryRowContext(ctx, "SELECT GET_LOCK("+lockName+", ?)", max(1, int(wait.Seconds()))).Scan(&got)
	if err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("take migration lock: another instance held it for %s", wait.Round(time.Second))
	}
	return nil
}

func (namedLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, "DO RELEASE_LOCK("+lockName+")"); err != nil {
		return fmt.Errorf("release migration lock: %w", err)
	}
	return nil
}
