package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"pushfan/config"
	"pushfan/internal/platform/sqldb"
	"pushfan/repository"
)

// openDB makes sure the database exists, connects and migrates: what
// serve, migrate and seed need, and all that migrate and seed need.
func openDB(ctx context.Context, cfg config.Config, log *slog.Logger) (*sqlx.DB, error) {
	dbctx, cancel := context.WithTimeout(ctx, cfg.DB.Timeout)
	defer cancel()
	if err := sqldb.EnsureDatabase(dbctx, cfg.MySQLDSN); err != nil {
		return nil, fmt.Errorf("ensuring database: %w", err)
	}
	pool, err := sqldb.Open(dbctx, cfg.MySQLDSN, cfg.DB.MaxOpen, log)
	if err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	if err := repository.Migrate(ctx, pool.DB, log); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrating: %w", err)
	}
	return pool, nil
}
