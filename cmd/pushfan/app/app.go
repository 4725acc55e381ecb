// Package app wires one pushfan instance from a Config and an open pool:
// the FCM client, the engine, the broadcast service, the job scheduler,
// retention and the HTTP API, and starts and stops them in dependency
// order. `pushfan serve` and the in-process test stacks build instances
// the same way through it.
package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"pushfan/apikey"
	"pushfan/audience"
	"pushfan/audit"
	"pushfan/broadcast"
	"pushfan/broadcast/plan"
	"pushfan/broadcast/reads"
	"pushfan/broadcast/rules"
	"pushfan/broadcast/run"
	"pushfan/broadcast/testsend"
	"pushfan/campaigns"
	"pushfan/caps"
	"pushfan/config"
	"pushfan/consent"
	"pushfan/cron"
	"pushfan/engagement"
	"pushfan/fanout"
	"pushfan/fcm"
	"pushfan/internal/platform/lifecycle"
	"pushfan/lease"
	"pushfan/metrics"
	"pushfan/model"
	"pushfan/msgtemplate"
	"pushfan/outcomes"
	"pushfan/quota"
	"pushfan/repository"
	"pushfan/retention"
	"pushfan/segment"
	"pushfan/server"
	"pushfan/server/templates"
	"pushfan/webhook"
)

// Instance is one wired pushfan; Service is not started yet.
type Instance struct {
	// Scheduler fires the recurring jobs; start it after Service.
	Scheduler *cron.Scheduler
	// Sender and Engine are the first app's (the only one's, in the
	// environment-only configuration); Apps has every app's.
	Sender   *fcm.Client
	Engine   *fanout.Engine
	Apps     []*AppParts
	Service  *broadcast.Service
	API      *server.Server
	Registry *prometheus.Registry // this instance's metrics, served at /metrics
	// Retention deletes old finished broadcasts (one instance at a time).
	Retention *retention.Runner
	// Quota is the first app's budget (see Apps).
	Quota *quota.Coordinator
	// Events stores the engagement events apps post (group commits).
	Events *engagement.Ingester
	// Webhooks delivers the outbox of events to the app's endpoints.
	Webhooks *webhook.Deliverer
	// Summaries writes the broadcast.engagement events, 1 h and 24 h after
	// a broadcast finished.
	Summaries *webhook.Summaries
	// Audiences reloads the named audiences (SIGHUP, POST
	// /push/audiences/reload).
	Audiences *Reloader
}

// New builds an instance on an open, migrated pool (sqldb.Open, then
// repository.Migrate); the pool stays the caller's to close. Named
// audiences are checked against the database and jobs validated here: a
// bad one stops start-up with an error naming it. extra are added to the
// API's options (a test's recording auditor).
func New(ctx context.Context, cfg config.Config, pool *sqlx.DB, log *slog.Logger, extra ...server.Option) (*Instance, error) {
	schema, err := CheckSchema(ctx, cfg, pool)
	if err != nil {
		return nil, err
	}
	appSchemas, err := CheckAppSchemas(ctx, cfg, pool)
	if err != nil {
		return nil, err
	}
	store := repository.New(pool, log).WithSchema(schema).WithApps(appSchemas)
	if schema.Mapped() {
		log.InfoContext(ctx, "built-in audiences read the schema mapping", "users", cfg.Schema.Users.Table, "tokens", cfg.Schema.Tokens.Table)
	}
	named := audience.NewRunner(pool)
	set, err := loadAudiences(ctx, cfg, named)
	if err != nil {
		return nil, err
	}
	// Every user of the named audiences reads them from the catalog at
	// the moment of use: a reload swaps the whole set (audiences.go).
	catalog := audience.NewCatalog(set)
	zone, quiet, err := localTime(cfg.Engine)
	if err != nil {
		return nil, err
	}
	jobs, err := cron.Compile(cfg.Jobs)
	if err != nil {
		return nil, fmt.Errorf("PUSHFAN_CONFIG: jobs: %w", err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, pool.DB)
	parts, err := buildApps(ctx, cfg, m, log)
	if err != nil {
		return nil, err
	}
	leases := lease.New(pool.DB, log)
	if cfg.Engine.OutcomeRetention == 0 {
		leases.KeepNoOutcomes() // PUSHFAN_OUTCOME_RETENTION=0 (docs/outcomes.md)
	}
	hooks, err := compileWebhooks(cfg)
	if err != nil {
		closeApps(parts)
		return nil, err
	}
	outbox := outboxEvents{out: webhook.NewOutbox(hooks), render: server.BroadcastObject}
	deliverer, err := webhookDeliverer(cfg, pool.DB, hooks, log)
	if err != nil {
		closeApps(parts)
		return nil, err
	}
	deliverer.OnDisabled = m.WebhookDisabled
	metrics.NewState(reg, pool.DB, appNames(parts), endpointNames(cfg), cfg.DB.Timeout, log)
	deliverer.OnLostClaim = m.WebhookLostClaim
	leases.SetEvents(outbox)
	keys, err := eventKeys(ctx, cfg, store)
	if err != nil {
		closeApps(parts)
		return nil, err
	}
	events := engagement.NewIngester(store, keys, log, cfg.DB.Timeout)
	events.OnCommitted = m.EventsIngested
	var tags *engagement.Tagger
	if cfg.Events.TrackingOn() {
		tags = engagement.NewTagger(keys, cfg.Events.TTL, cfg.Events.PublicURL)
		if cfg.Events.PublicURL == "" {
			log.WarnContext(ctx, "PUSHFAN_PUBLIC_URL is not set: links in messages are sent as they are, and clicks on them are not counted (set it to where apps reach this server)")
		}
	}
	ledger := caps.NewLedger(pool.DB, log)
	requestRules := rules.Rules{
		MaxUserIDs: cfg.Engine.MaxUserIDs,
		Horizon:    cfg.HTTP.ScheduleHorizon,
		Named:      catalog,
		RateLimit:  cfg.Engine.RateLimit,
		Tracking:   cfg.Events.TrackingOn(),
		PublicURL:  cfg.Events.PublicURL,

		TransactionalUsers: cfg.Engine.TransactionalUsers,
		DefaultZone:        zone,
		QuietHours:         quiet,
		Caps:               capRules(cfg),
		Categories:         categoryRules(cfg),
		Apps:               appBudgets(cfg),
	}
	// stopped is the service's "no more work", which the reads' waits
	// and the test sends beside it watch.
	stopped := new(lifecycle.Latch)
	apps := instanceApps(parts, store)
	rd := reads.New(store, apps, reads.Options{
		DBTimeout:    cfg.DB.Timeout,
		Rules:        requestRules,
		Named:        named,
		StatsTTL:     cfg.HTTP.StatsCache,
		BroadcastTTL: cfg.HTTP.BroadcastCache,
		PreviewTTL:   cfg.HTTP.PreviewCache,
		Stopped:      stopped,
	})
	svc := broadcast.New(store, leases, apps, rd, log, broadcast.Options{
		DBTimeout:    cfg.DB.Timeout,
		Lease:        cfg.Engine.Lease,
		PollInterval: cfg.Engine.PollInterval,
		Owner:        cfg.Engine.InstanceID,
		Rules:        requestRules,
		Named:        named,
		HoldExpiry:   cfg.Engine.HoldExpiry,
		FourEyes:     cfg.Engine.ReleaseFourEyes,
		StartSpread:  cfg.Engine.StartSpread,
		Stopped:      stopped,
		Plan: plan.Options{
			ChunkWidth:      uint64(cfg.Engine.ChunkWidth),
			MaxChunks:       cfg.Engine.MaxChunks,
			PlanParallel:    cfg.Engine.PlanParallel,
			PlanRetry:       cfg.Engine.PlanRetry,
			PollInterval:    cfg.Engine.PollInterval,
			HandBackTimeout: cfg.Engine.HandBackTimeout,
		},
		Run: run.Options{
			FlushInterval:   cfg.Engine.FlushInterval,
			ChunkParallel:   cfg.Engine.ChunkParallel,
			PollInterval:    cfg.Engine.PollInterval,
			HandBackTimeout: cfg.Engine.HandBackTimeout,
			Metrics:         m,
			Tags:            tags,
			Invalidated:     outbox.invalidated,
			Ledger:          ledger,
		},
	})
	// Without tracking there is no engagement to summarize: an outbox of
	// no endpoints keeps the summaries from starting.
	summaryOut := outbox.out
	if !cfg.Events.TrackingOn() {
		summaryOut = webhook.NewOutbox(nil)
	}
	summaries := webhook.NewSummaries(pool.DB, summaryOut, summarySource{store: store, reads: rd}, 30*time.Second, log)
	summaries.OnFailed = m.WebhookSummaryFailed
	budgets(parts, pool.DB, m, svc.Owner(), log)
	tests := testsend.New(apps, rd, log.With("instance", svc.Owner()), testsend.Options{
		DBTimeout: cfg.DB.Timeout, Rules: requestRules, Tags: tags, Stopped: stopped,
	})
	consents := consent.New(pool.DB, cfg.CategoryList(), cfg.DB.Timeout, log)
	// An exact count ends before the HTTP write deadline would cut its answer.
	segments := segment.New(store, segment.Options{DBTimeout: cfg.DB.Timeout, ExactTimeout: min(60*time.Second, cfg.HTTP.WriteTimeout*9/10)})
	var appNames []string
	for _, a := range cfg.AppList() {
		appNames = append(appNames, a.Name)
	}
	// A key's create and revoke write the request's audit entry in their
	// own transaction.
	apiKeys := apikey.New(pool.DB, apikey.Options{Apps: appNames, DBTimeout: cfg.DB.Timeout, OnWrite: auditKey}, log)
	reloader := &Reloader{cfg: cfg, named: named, catalog: catalog, rules: requestRules, jobs: jobs, log: log}
	// The audit trail: the routes' entries that join no other change
	// (sign-ins among them), and its reads.
	trail := audit.NewStore(pool.DB)
	dom := apiDomain(cfg, svc, rd, tests, consents, segments, apiKeys, reloader, jobs)
	dom.AuditLog = trail
	// The message templates, and the public URL their links are checked against.
	dom.Templates = templates.Routes{Domain: msgtemplate.New(pool.DB, cfg.DB.Timeout, log), PublicURL: cfg.Events.PublicURL}
	opts := append([]server.Option{server.WithMetrics(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})),
		server.WithSessions(store), server.WithCluster(clusterReader(parts, leases)), server.WithEvents(events), server.WithWebhooks(deliverer),
		apiOIDC(cfg, store), server.WithAuditor(trail)}, extra...)
	// A user's deliveries, from the kept outcomes.
	dom.Deliveries = &outcomes.Reader{DB: pool.DB, Apps: outcomeApps{store: store, names: appNames, named: named, catalog: catalog}}
	dom.Campaigns = &campaigns.Reader{DB: pool.DB, Timeout: cfg.DB.Timeout} // the campaign analytics, from the broadcasts' counters
	api := server.New(apiConfig(cfg, log), dom, store, log, opts...)
	if err := svc.CheckJobs(jobs); err != nil {
		closeApps(parts)
		return nil, fmt.Errorf("jobs: %w", err)
	}
	ret := retention.New(store, log, retention.Options{Keep: cfg.Engine.Retention, Ledger: ledger, Trail: store, AuditKeep: cfg.Engine.AuditRetention,
		Outcomes: store, OutcomeKeep: cfg.Engine.OutcomeRetention})
	sched := cron.NewScheduler(jobs, svc.Jobs(), log)
	return &Instance{Sender: parts[0].Sender, Engine: parts[0].Engine, Apps: parts, Service: svc, API: api, Registry: reg, Scheduler: sched, Retention: ret,
		Quota: parts[0].Quota, Events: events, Webhooks: deliverer, Summaries: summaries, Audiences: reloader}, nil
}

// Start starts the parts in dependency order: the engine's workers, the
// rate budget's heartbeats, the broadcast service (dispatcher, promoter),
// the events' writer, the job scheduler, retention. The HTTP API (API) is the caller's to
// serve.
func (i *Instance) Start(ctx context.Context) {
	for _, a := range i.Apps {
		a.Engine.Start(ctx)
		a.Quota.Start(ctx)
	}
	i.Service.Start(ctx)
	i.Events.Start(ctx)
	i.Webhooks.Start(ctx)
	i.Summaries.Start(ctx)
	i.Scheduler.Start(ctx)
	i.Retention.Start(ctx)
}

// Stop stops the parts in the reverse order, within ctx's one deadline:
// no new fires or retention passes; the service stops taking work and then
// its chunk runs checkpoint and release their leases; then this instance
// leaves the rate budget (the others take its share), the engine's workers
// end, and the sender's connections close. It returns the parts' errors (a
// missed deadline), having tried every part.
func (i *Instance) Stop(ctx context.Context) error {
	errs := []error{i.API.Stop(ctx), i.Events.Stop(ctx), i.Webhooks.Stop(ctx), i.Summaries.Stop(ctx), i.Scheduler.Stop(ctx), i.Retention.Stop(ctx), i.Service.Stop(ctx)}
	for _, a := range i.Apps {
		errs = append(errs, a.Quota.Stop(ctx))
	}
	for _, a := range i.Apps {
		errs = append(errs, a.Engine.Stop(ctx))
	}
	closeApps(i.Apps)
	return errors.Join(errs...)
}

// capRules are the configuration's frequency caps, in canonical form (the
// configuration was validated: every spec parses).
func capRules(cfg config.Config) rules.CapRules {
	canon := func(spec string) string {
		set, err := caps.Parse(spec)
		if err != nil {
			return spec
		}
		return set.String()
	}
	r := rules.CapRules{Default: canon(cfg.Engine.FrequencyCap), Named: map[string]string{}, Jobs: map[string]string{}}
	for name, spec := range cfg.FrequencyCaps {
		r.Named[name] = canon(spec)
	}
	for _, j := range cfg.Jobs {
		if j.FrequencyCap != "" {
			r.Jobs[j.Name] = j.FrequencyCap
		}
	}
	return r
}

// categoryRules are the configuration's message categories as the request
// rules apply them.
func categoryRules(cfg config.Config) rules.CategoryRules {
	r := rules.CategoryRules{List: map[string]model.Category{}, Default: cfg.DefaultCategory}
	for _, c := range cfg.CategoryList() {
		r.List[c.Name] = c
	}
	return r
}

// auditKey writes the request's audit entry in the transaction of a key's
// create or revoke (apikey.Options.OnWrite); a new key is its target.
func auditKey(ctx context.Context, tx *sql.Tx, action string, k apikey.Key, _ model.Actor) error {
	if action == apikey.ActionCreate {
		audit.Created(ctx, "key", k.ID)
	}
	return audit.Write(ctx, tx)
}
