package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"pushfan/audience"
	"pushfan/broadcast/rules"
	"pushfan/config"
	"pushfan/cron"
)

// loadAudiences compiles cfg's named audiences and checks each against
// the database: what start-up and every reload do.
func loadAudiences(ctx context.Context, cfg config.Config, named *audience.Runner) (*audience.Set, error) {
	set, err := audience.Build(ctx, named, cfg.AllAudiences(), cfg.AppOf, cfg.DB.Timeout, time.Now().UTC())
	if err != nil {
		return nil, fmt.Errorf("PUSHFAN_CONFIG: audiences: %w", err)
	}
	return set, nil
}

// Reloader reloads the named audiences (SIGHUP, POST
// /push/audiences/reload): it reads the `audiences:` of PUSHFAN_CONFIG's
// file again, checks them as start-up does (their app, cap and category
// references, the SQL compiled and run against the database, and every
// cron job's audience against the new set), and swaps the new set into
// the catalog only when all of it passes. Otherwise the current set stays
// and the error is an *audience.ReloadError with every problem.
type Reloader struct {
	cfg     config.Config // as started: the file's path and the settings the audiences name
	named   *audience.Runner
	catalog *audience.Catalog
	rules   rules.Rules
	jobs    []*cron.Compiled
	log     *slog.Logger
	mu      sync.Mutex // one reload at a time: two would race their swaps
}

// Reload reloads the named audiences and returns the set now current.
func (r *Reloader) Reload(ctx context.Context) (*audience.Set, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	set, err := r.build(ctx)
	if err != nil {
		problems := audience.Problems(err)
		r.log.ErrorContext(ctx, "reloading the named audiences failed; the current ones stay", "file", r.cfg.File, "problems", problems)
		return r.catalog.Load(), &audience.ReloadError{Problems: problems}
	}
	old := r.catalog.Swap(set)
	c := set.Diff(old)
	r.log.InfoContext(ctx, "named audiences reloaded", "file", r.cfg.File, "audiences", len(set.List()),
		"added", c.Added, "removed", c.Removed, "changed", c.Changed)
	return set, nil
}

// build is the new set, or every problem of the file: the references,
// the SQL and, when those pass, the jobs against the new set.
func (r *Reloader) build(ctx context.Context) (*audience.Set, error) {
	cfg, err := r.cfg.ReloadAudiences()
	if err != nil {
		return nil, err
	}
	// Each problem names its audience or job already: no prefix, which
	// would mark the first of them only.
	refs := cfg.ValidateAudiences()
	set, err := audience.Build(ctx, r.named, cfg.AllAudiences(), cfg.AppOf, cfg.DB.Timeout, time.Now().UTC())
	if err := errors.Join(refs, err); err != nil {
		return nil, err
	}
	if err := r.rules.WithAudiences(set).CheckJobs(r.jobs); err != nil {
		return nil, err
	}
	return set, nil
}
