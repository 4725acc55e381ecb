// Command pushfan is the one binary: serve, migrate, seed, emulator.
// It holds wiring and signal handling only; the logic lives in the packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"pushfan/config"
	"pushfan/fcmemu"
	"pushfan/internal/platform/logging"
	"pushfan/internal/platform/sdnotify"
)

const usage = `pushfan: self-hosted FCM broadcast fan-out

usage: pushfan <command> [flags]

commands:
  serve      run the HTTP API (applies pending migrations first)
  migrate    create the database if missing and apply migrations
  seed       insert deterministic demo users and device tokens
  emulator   run the FCM HTTP v1 emulator (see pushfan emulator -h)
  config check
             print the effective configuration (secrets masked), or every
             problem and exit 1 when it is invalid
  config doc print the configuration reference (docs/configuration.md)
  healthcheck
             exit 0 when GET /readyz of PUSHFAN_HTTP_ADDR answers 200, else 1
             with the reason on one line (the image's HEALTHCHECK)
  version    print the version, VCS revision and commit time of this build
  help       show this text

configuration comes from the environment (see docs/configuration.md).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pushfan:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "emulator":
		log, err := logging.New(stderr, envOr("PUSHFAN_LOG_FORMAT", "text"), envOr("PUSHFAN_LOG_LEVEL", "info"))
		if err != nil {
			return err
		}
		return fcmemu.Main(ctx, rest, stdout, log)
	case "config":
		return configCommand(rest, os.LookupEnv, stdout, stderr)
	case "version":
		return printVersion(stdout)
	case "healthcheck":
		return healthcheck(ctx, rest, os.LookupEnv, stderr)
	case "serve", "migrate", "seed":
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}

	// Each command checks what it uses: migrate and seed need a database,
	// not FCM credentials.
	parts := config.PartsAll
	if cmd == "migrate" || cmd == "seed" {
		parts = config.PartDatabase | config.PartLog
	}
	cfg, err := config.FromOS(parts)
	if err != nil {
		return fmt.Errorf("configuration is invalid:\n%w", err)
	}
	log, err := logging.New(stderr, cfg.Log.Format, cfg.Log.Level)
	if err != nil {
		return err
	}
	switch cmd {
	case "serve":
		notify, err := sdnotify.New(os.LookupEnv, log)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, log, notify)
	case "migrate":
		pool, err := openDB(ctx, cfg, log)
		if err != nil {
			return err
		}
		return pool.Close()
	default: // seed
		return seed(ctx, cfg, log, rest, stdout)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
