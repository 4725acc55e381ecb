package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"pushfan/config"
	"pushfan/internal/platform/sqldb"
	"pushfan/repository"
)

// startupDBWait is how long start-up keeps trying a database that is
// unreachable or restarting: a replica started (or restarted by its
// supervisor) next to a database that is itself restarting, or cut off for
// seconds, comes up when the database does instead of exiting at its first
// error and relying on the supervisor's restart budget.
const startupDBWait = 30 * time.Second

// openDB makes sure the database exists, connects and migrates: what
// serve, migrate and seed need, and all that migrate and seed need. A
// failure that is not the database's answer to a statement (a refused or
// dropped connection, a timeout, a server shutting down) is retried with
// backoff for up to startupDBWait, each attempt logged.
func openDB(ctx context.Context, cfg config.Config, log *slog.Logger) (*sqlx.DB, error) {
	return openDBWithin(ctx, cfg, log, startupDBWait)
}

func openDBWithin(ctx context.Context, cfg config.Config, log *slog.Logger, wait time.Duration) (*sqlx.DB, error) {
	start := time.Now()
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		pool, err := openDBOnce(ctx, cfg, log)
		if err == nil {
			if attempt > 1 {
				log.Info("database reachable", "attempts", attempt, "after", time.Since(start).Round(time.Millisecond))
			}
			return pool, nil
		}
		left := wait - time.Since(start)
		if sqldb.IsStatementError(err) || ctx.Err() != nil || left <= 0 {
			if attempt > 1 {
				return nil, fmt.Errorf("%w (after %d attempts in %v)", err, attempt, time.Since(start).Round(time.Millisecond))
			}
			return nil, err
		}
		pause := min(backoff, left)
		log.Warn("database not reachable at start-up; retrying", "attempt", attempt, "in", pause, "gives_up_in", left.Round(time.Second), "err", err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for the database: %w", context.Cause(ctx))
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func openDBOnce(ctx context.Context, cfg config.Config, log *slog.Logger) (*sqlx.DB, error) {
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
