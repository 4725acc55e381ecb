// Package app wires one pushfan instance from a Config: the FCM sender, the
// engine, the broadcast service and the HTTP API. `pushfan serve` and the
// in-process test stacks build instances the same way through it.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"pushfan/audience"
	"pushfan/broadcast"
	"pushfan/config"
	"pushfan/cron"
	"pushfan/fanout"
	"pushfan/lease"
	"pushfan/metrics"
	"pushfan/repository"
	"pushfan/retention"
	"pushfan/server"
)

// Instance is one wired pushfan; Service is not started yet.
type Instance struct {
	// Scheduler fires the recurring jobs; start it after Service.
	Scheduler *server.Scheduler
	Sender    *fanout.FCMSender
	Engine    *fanout.Engine
	Service   *broadcast.Service
	API       *server.Server
	Registry  *prometheus.Registry // this instance's metrics, served at /metrics
	// Retention deletes old finished broadcasts (one instance at a time).
	Retention *retention.Runner
}

// New builds an instance on an open, migrated store. Named audiences are
// checked against the database and jobs validated here: a bad one stops
// start-up with an error naming it.
func New(ctx context.Context, cfg config.Config, store *repository.Store, log *slog.Logger) (*Instance, error) {
	audiences, err := audience.Compile(cfg.Audiences)
	if err != nil {
		return nil, fmt.Errorf("audiences: %w", err)
	}
	var checkErrs []error
	byName := map[string]*audience.Audience{}
	for _, a := range audiences {
		cctx, cancel := context.WithTimeout(ctx, cfg.DB.Timeout)
		if err := a.Check(cctx, store.DB()); err != nil {
			checkErrs = append(checkErrs, err)
		}
		cancel()
		byName[a.Name()] = a
	}
	if err := errors.Join(checkErrs...); err != nil {
		return nil, fmt.Errorf("audiences: %w", err)
	}
	jobs, err := cron.Compile(cfg.Jobs)
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	sender, err := fanout.NewFCMSender(ctx, fanout.FCMOptions{
		Endpoint:        cfg.FCMEndpoint,
		ProjectID:       cfg.FCMProjectID,
		CredentialsFile: cfg.CredentialsFile,
		CAFile:          cfg.FCMCAFile,
		H2C:             cfg.FCMH2C,
		Client:          cfg.FCMClient,
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
	svc := broadcast.New(store, lease.New(store.DB().DB, log), engine, log, broadcast.Options{
		FlushInterval:   cfg.Engine.FlushInterval,
		DBTimeout:       cfg.DB.Timeout,
		Lease:           cfg.Engine.Lease,
		ChunkWidth:      uint64(cfg.Engine.ChunkWidth),
		MaxChunks:       cfg.Engine.MaxChunks,
		ChunkParallel:   cfg.Engine.ChunkParallel,
		PollInterval:    cfg.Engine.PollInterval,
		Owner:           cfg.Engine.InstanceID,
		Metrics:         m,
		Audiences:       byName,
		StatsTTL:        cfg.HTTP.StatsCache,
		BroadcastTTL:    cfg.HTTP.BroadcastCache,
		HandBackTimeout: cfg.Engine.HandBackTimeout,
	})
	api := server.New(cfg, svc, store, log,
		server.WithMetrics(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})),
		server.WithAudiences(audiences), server.WithJobs(jobs))
	if err := api.CheckJobs(); err != nil {
		sender.Close()
		return nil, fmt.Errorf("jobs: %w", err)
	}
	ret := retention.New(store, log, retention.Options{Keep: cfg.Engine.Retention})
	return &Instance{Sender: sender, Engine: engine, Service: svc, API: api, Registry: reg, Scheduler: api.Scheduler(), Retention: ret}, nil
}

// Close releases the sender's connections (after Service.Stop).
func (i *Instance) Close() { i.Sender.Close() }
