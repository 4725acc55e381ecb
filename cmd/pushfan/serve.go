package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"pushfan/config"
	"pushfan/internal/app"
	"pushfan/repository"
)

// openStore makes sure the database exists, connects and migrates.
func openStore(ctx context.Context, cfg config.Config, log *slog.Logger) (*repository.Store, error) {
	dbctx, cancel := context.WithTimeout(ctx, cfg.DB.Timeout)
	defer cancel()
	if err := repository.EnsureDatabase(dbctx, cfg.MySQLDSN); err != nil {
		return nil, fmt.Errorf("ensuring database: %w", err)
	}
	store, err := repository.Open(dbctx, cfg.MySQLDSN, cfg.DB.MaxOpen, log)
	if err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	if err := repository.Migrate(ctx, store.DB().DB, log); err != nil {
		store.Close()
		return nil, fmt.Errorf("migrating: %w", err)
	}
	return store, nil
}

func serve(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	store, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer store.Close()

	inst, err := app.New(ctx, cfg, store, log)
	if err != nil {
		return err
	}
	defer inst.Close()
	svc := inst.Service
	svc.Start()
	inst.Scheduler.Start()
	inst.Retention.Start(ctx)
	defer inst.Retention.Stop(context.Background()) //nolint:errcheck // its context is the process's: it has stopped by then
	srv := inst.API.HTTPServer()
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		svc.Stop()
		return fmt.Errorf("listening on %s: %w", cfg.HTTPAddr, err)
	}
	fcm := cfg.FCMEndpoint
	if fcm == "" {
		fcm = "Google FCM"
	}
	log.Info("pushfan serving", "addr", ln.Addr().String(), "fcm", fcm, "concurrency", cfg.Engine.Concurrency)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case err := <-serveErr:
		inst.Scheduler.Stop()
		svc.Stop()
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: no new requests; stopping broadcasts", "deadline", cfg.HTTP.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	shutdownDone := make(chan error, 1)
	// Shutdown stops accepting at once and waits for handlers; stopping the
	// service releases handlers that wait on a broadcast.
	go func() { shutdownDone <- srv.Shutdown(sctx) }()
	stopped := make(chan struct{})
	go func() {
		inst.Scheduler.Stop()
		svc.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-sctx.Done():
		log.Error("broadcasts did not stop within the shutdown deadline")
	}
	if err := <-shutdownDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http shutdown: %w", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("pushfan stopped", "at", time.Now().UTC())
	return nil
}
