// Package app wires one pushfan instance from a Config: the FCM sender, the
// engine, the broadcast service and the HTTP API. `pushfan serve` and the
// in-process test stacks build instances the same way through it.
package app

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"pushfan/broadcast"
	"pushfan/config"
	"pushfan/fanout"
	"pushfan/metrics"
	"pushfan/repository"
	"pushfan/server"
)

// Instance is one wired pushfan; Service is not started yet.
type Instance struct {
	Sender   *fanout.FCMSender
	Engine   *fanout.Engine
	Service  *broadcast.Service
	API      *server.Server
	Registry *prometheus.Registry // this instance's metrics, served at /metrics
}

// New builds an instance on an open, migrated store.
func New(ctx context.Context, cfg config.Config, store *repository.Store, log *slog.Logger) (*Instance, error) {
	sender, err := fanout.NewFCMSender(ctx, fanout.FCMOptions{
		Endpoint:        cfg.FCMEndpoint,
		ProjectID:       cfg.FCMProjectID,
		CredentialsFile: cfg.CredentialsFile,
		CAFile:          cfg.FCMCAFile,
		H2C:             cfg.FCMH2C,
		Concurrency:     cfg.Engine.Concurrency,
	})
	if err != nil {
		return nil, err
	}
	engine, err := fanout.New(fanout.Config{
		Concurrency:    cfg.Engine.Concurrency,
		PageSize:       cfg.Engine.PageSize,
		SendTimeout:    cfg.Engine.SendTimeout,
		MaxAttempts:    cfg.Engine.MaxAttempts,
		RetryBaseDelay: cfg.Engine.RetryBaseDelay,
		RetryMaxDelay:  cfg.Engine.RetryMaxDelay,
	}, sender, fanout.NewThrottle(cfg.Engine.RateLimit, cfg.Engine.RampUp), log)
	if err != nil {
		sender.Close()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, store.DB())
	engine.SetMetrics(m)
	svc := broadcast.New(store, engine, log, broadcast.Options{
		FlushInterval: cfg.Engine.FlushInterval,
		DBTimeout:     cfg.DB.Timeout,
		Lease:         cfg.Engine.Lease,
		ChunkWidth:    uint64(cfg.Engine.ChunkWidth),
		MaxChunks:     cfg.Engine.MaxChunks,
		ChunkParallel: cfg.Engine.ChunkParallel,
		PollInterval:  cfg.Engine.PollInterval,
		Owner:         cfg.Engine.InstanceID,
		Metrics:       m,
	})
	api := server.New(cfg, svc, store, log, server.WithMetrics(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	return &Instance{Sender: sender, Engine: engine, Service: svc, API: api, Registry: reg}, nil
}

// Close releases the sender's connections (after Service.Stop).
func (i *Instance) Close() { i.Sender.Close() }
