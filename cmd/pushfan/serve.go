package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"pushfan/cmd/pushfan/app"
	"pushfan/config"
	"pushfan/internal/platform/sdnotify"
)

// serve runs one instance until ctx ends (SIGTERM, SIGINT; SIGHUP reloads
// the named audiences, app.Reloader), then shuts it
// down in dependency order within PUSHFAN_SHUTDOWN_TIMEOUT: the listener
// closes at once; the scheduler and retention stop; the service stops
// taking work, which also lets requests waiting on a broadcast answer, and
// its chunk runs checkpoint and release their leases; the HTTP server
// drains; the engine's workers end; the sender and the pool close; last,
// the metrics listener (PUSHFAN_METRICS_ADDR), if there is one.
//
// Under systemd (Type=notify) it says READY=1 once it serves, pings the
// watchdog while its HTTP server answers, and says STOPPING=1 when the
// shutdown begins; elsewhere notify does nothing.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger, notify *sdnotify.Notifier) error {
	pool, err := openDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()

	inst, err := app.New(ctx, cfg, pool, log)
	if err != nil {
		return err
	}
	// SIGHUP reloads the named audiences, and never stops the server.
	hangups := make(chan os.Signal, 1)
	signal.Notify(hangups, syscall.SIGHUP)
	defer signal.Stop(hangups)
	go reloadOnHangup(ctx, hangups, inst.Audiences, log)
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		inst.Sender.Close()
		return fmt.Errorf("listening on %s: %w", cfg.HTTPAddr, err)
	}
	alive, err := livenessProbe(ln.Addr().String())
	if err != nil {
		ln.Close()
		inst.Sender.Close()
		return err
	}
	// PUSHFAN_METRICS_ADDR: /metrics on a listener of its own.
	metricsSrv := inst.API.MetricsServer()
	var metricsLn net.Listener
	if metricsSrv != nil {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			ln.Close()
			inst.Sender.Close()
			return fmt.Errorf("listening on %s (PUSHFAN_METRICS_ADDR): %w", cfg.MetricsAddr, err)
		}
	}
	// The parts run on a context of their own: shutdown stops them one by
	// one, in order, rather than all at once when ctx ends.
	inst.Start(context.WithoutCancel(ctx))
	srv := inst.API.HTTPServer()
	fcm := cfg.FCMEndpoint
	if fcm == "" {
		fcm = "Google FCM"
	}
	log.Info("pushfan serving", "addr", ln.Addr().String(), "fcm", fcm, "concurrency", cfg.Engine.Concurrency)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	if metricsSrv != nil {
		log.Info("serving metrics", "addr", metricsLn.Addr().String())
		go func() {
			if err := metricsSrv.Serve(metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("the metrics listener stopped", "addr", cfg.MetricsAddr, "err", err)
			}
		}()
	}
	if err := notify.Ready(); err != nil {
		log.Warn("could not tell systemd this instance is ready", "err", err)
	}
	notify.StartWatchdog(ctx, alive)
	var failed error
	select {
	case err := <-serveErr:
		failed = fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	if err := notify.Stopping(); err != nil {
		log.Warn("could not tell systemd this instance is stopping", "err", err)
	}
	notify.StopWatchdog()
	log.Info("shutting down: no new requests; stopping broadcasts", "deadline", cfg.HTTP.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	// Shutdown closes the listener at once and waits for handlers; it runs
	// beside the parts' stop, which releases handlers waiting on a broadcast.
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- srv.Shutdown(sctx) }()
	stopErr := inst.Stop(sctx)
	if err := <-shutdownDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
		stopErr = errors.Join(stopErr, fmt.Errorf("http shutdown: %w", err))
	}
	if metricsSrv != nil {
		// Last: the metrics stay readable while the rest stops.
		if err := metricsSrv.Shutdown(sctx); err != nil {
			_ = metricsSrv.Close()
		}
	}
	if failed == nil {
		if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			failed = fmt.Errorf("http server: %w", err)
		}
	}
	if stopErr != nil {
		log.Error("the instance did not stop cleanly within the shutdown deadline", "err", stopErr)
	}
	log.Info("pushfan stopped", "at", time.Now().UTC())
	return errors.Join(failed, stopErr)
}

// reloadOnHangup reloads the named audiences at each SIGHUP until ctx
// ends. The reload logs what it changed, or every problem (the current
// audiences then stay).
func reloadOnHangup(ctx context.Context, hangups <-chan os.Signal, r *app.Reloader, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hangups:
			log.InfoContext(ctx, "SIGHUP: reloading the named audiences")
			_, _ = r.Reload(ctx)
		}
	}
}

// livenessProbe asks this instance's own /healthz: the watchdog pings
// systemd only while the HTTP server answers, and not on /readyz, since a
// database outage is not mended by restarting pushfan.
func livenessProbe(addr string) (func(context.Context) error, error) {
	target, err := localURL(addr, "/healthz")
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return fmt.Errorf("GET %s: %w", target, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s: %w", target, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", target, resp.Status)
		}
		return nil
	}, nil
}
