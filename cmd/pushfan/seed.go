package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"pushfan/config"
	"pushfan/internal/devtools/demo"
	"pushfan/internal/platform/sqldb"
	"pushfan/model"
	"pushfan/repository"
)

func seed(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(stdout)
	var o demo.SeedOptions
	var start uint64
	var fresh bool
	fs.IntVar(&o.Users, "users", 1000, "how many users to insert")
	fs.IntVar(&o.TokensPerUserMax, "tokens-per-user", 3, "users cycle through 1..N device tokens")
	fs.IntVar(&o.DisabledEvery, "disabled-every", 10, "every Nth user has push disabled (0 = none)")
	fs.IntVar(&o.InvalidatedEvery, "invalidated-every", 25, "every Nth token is already invalidated (0 = none)")
	fs.IntVar(&o.DeadEvery, "dead-every", 20, "every Nth token is one the emulator answers UNREGISTERED (0 = none)")
	fs.Uint64Var(&start, "start-user-id", 1, "first user id")
	fs.BoolVar(&fresh, "fresh", false, "drop the database first (only a database on this machine that holds the demo's seeded users), migrate it again, then seed: the demo's fresh start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.StartUserID = start
	if fresh {
		// The broadcasts, audit entries and outcomes of earlier tours go
		// too: a second `make run` otherwise keeps them, and seeding finds
		// every demo user there already ("seeded 0 users").
		if err := sqldb.RequireLocal(cfg.MySQLDSN); err != nil {
			return err
		}
		if err := demo.CheckDemoDatabase(ctx, cfg.MySQLDSN); err != nil {
			return err
		}
		if err := sqldb.DropLocalDatabase(ctx, cfg.MySQLDSN); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "dropped the demo database; migrating it again")
	}
	pool, err := openDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	seeder := demo.New(pool, log)
	users, tokens, err := seeder.SeedDemo(ctx, o)
	if err != nil {
		return err
	}
	subs, err := seeder.SeedDemoSubscriptions(ctx, o.Users)
	if err != nil {
		return err
	}
	consents, err := seeder.SeedDemoConsents(ctx, o.Users)
	if err != nil {
		return err
	}
	eligible, err := repository.New(pool, log).CountAudience(ctx, model.Audience{All: true})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "seeded %d users, %d device tokens, %d demo subscriptions and %d advertising consents; %d tokens are eligible for an \"all\" broadcast\n", users, tokens, subs, consents, eligible)
	return nil
}
