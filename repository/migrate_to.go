package repository

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"log/slog"

	"pushfan/internal/platform/sqldb"

	"github.com/pressly/goose/v3"
)

// MigrateTo applies the pending migrations up to and including version,
// and no later one: a database at the schema of an older release, for the
// upgrade tests (a database made by that release, then migrated by this
// one with Migrate). It takes no lock: nothing else migrates the database.
func MigrateTo(ctx context.Context, db *sql.DB, version int64, log *slog.Logger) error {
	log = sqldb.OrDiscard(log)
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("migrations fs: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectMySQL, db, sub,
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(log),
	)
	if err != nil {
		return fmt.Errorf("goose provider: %w", err)
	}
	if _, err := provider.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrate up to version %d: %w", version, err)
	}
	got, err := provider.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	if got != version {
		return fmt.Errorf("migrate up to version %d: the database is at version %d (no such migration?)", version, got)
	}
	// As the release built for that schema would have left it.
	return RaiseFence(ctx, db, version)
}
