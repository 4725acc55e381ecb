package app

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"pushfan/broadcast"
	"pushfan/config"
	"pushfan/fanout"
	"pushfan/fcm"
	"pushfan/metrics"
	"pushfan/model"
	"pushfan/quota"
	"pushfan/repository"
)

// AppParts are one app's sending parts on this instance (docs/apps.md):
// its FCM client (its project, credentials and endpoint), its engine with
// its own throttle and workers, and its share of its project's budget.
type AppParts struct {
	Name   string
	Sender *fcm.Client
	Engine *fanout.Engine
	// Quota keeps the engine's throttle at this instance's share of the
	// app's project budget; a 429 from one project pauses only its app.
	Quota     *quota.Coordinator
	RateLimit float64
	// Delivery is the app's delivery defaults by class.
	Delivery model.DeliveryDefaults

	quotaThrottle *fanout.Throttle // the engine's, which Quota sets
}

// buildApps makes every configured app's sender and engine. On an error
// it closes what it made.
func buildApps(ctx context.Context, cfg config.Config, m *metrics.Metrics, log *slog.Logger) ([]*AppParts, error) {
	var out []*AppParts
	apps := cfg.AppList()
	for _, a := range apps {
		concurrency := appConcurrency(cfg.Engine.Concurrency, a.RateLimit, apps)
		alog := log
		if len(cfg.Apps) > 0 {
			alog = log.With("app", a.Name)
		}
		sender, err := fcm.New(ctx, fcm.Options{
			Endpoint:        a.Endpoint,
			ProjectID:       a.ProjectID,
			CredentialsFile: a.Credentials,
			CAFile:          cfg.FCMCAFile,
			H2C:             cfg.FCMH2C,
			Client:          cfg.FCMClient,
			HTTP2:           cfg.FCMHTTP2,
			Log:             alog,
			Concurrency:     concurrency,
		})
		if err != nil {
			closeApps(out)
			return nil, fmt.Errorf("app %s: %w", a.Name, err)
		}
		throttle := fanout.NewThrottle(a.RateLimit, cfg.Engine.RampUp, cfg.Engine.RateWindow)
		engine, err := fanout.New(fanout.Config{
			Concurrency:    concurrency,
			PageSize:       cfg.Engine.PageSize,
			SendTimeout:    cfg.Engine.SendTimeout,
			MaxAttempts:    cfg.Engine.MaxAttempts,
			RetryBaseDelay: cfg.Engine.RetryBaseDelay,
			RetryMaxDelay:  cfg.Engine.RetryMaxDelay,
		}, sender, throttle, alog)
		if err != nil {
			sender.Close()
			closeApps(out)
			return nil, fmt.Errorf("app %s: %w", a.Name, err)
		}
		engine.SetMetrics(m.ForApp(a.Name))
		out = append(out, &AppParts{Name: a.Name, Sender: sender, Engine: engine, RateLimit: a.RateLimit, Delivery: cfg.DeliveryOf(a), quotaThrottle: throttle})
	}
	return out, nil
}

// appConcurrency is an app's ceiling of sends in flight: its share of the
// instance's PUSHFAN_CONCURRENCY in proportion to its rate limit, so that
// the ceiling, and with it the memory and connections it bounds, stays
// the instance's however many apps it serves. Each pool follows rate ×
// latency below its ceiling, so a share in proportion to the rate lets
// every app reach its quota at the latency the whole ceiling allows one
// app alone. An app's ceiling is at least minAppConcurrency (the engine's
// smallest pool), or the whole ceiling if that is smaller.
func appConcurrency(total int, rate float64, apps []config.App) int {
	if len(apps) <= 1 {
		return total
	}
	var sum float64
	for _, a := range apps {
		sum += a.RateLimit
	}
	share := float64(total) / float64(len(apps))
	if sum > 0 {
		share = float64(total) * rate / sum
	}
	return min(total, max(minAppConcurrency, int(share)))
}

// minAppConcurrency is the least ceiling an app's pool is given: the
// engine's smallest pool (fanout's minWorkers).
const minAppConcurrency = 16

// budgets joins each app to its project's budget, as member owner.
func budgets(parts []*AppParts, db *sql.DB, m *metrics.Metrics, owner string, log *slog.Logger) {
	for _, p := range parts {
		// Each app has a budget of its own: its lines say whose.
		p.Quota = quota.New(db, log.With("app", p.Name), p.quotaThrottle, p.Engine.Demand, quota.Options{
			Project: p.Sender.ProjectID(), Instance: quota.Member(owner), Limit: p.RateLimit,
			Schema: repository.SchemaVersion(),
		})
		p.Quota.OnShare(m.ForApp(p.Name).Share)
	}
}

// instanceApps are the apps as the broadcast service runs them: each
// engine with the Store reading its tokens.
func instanceApps(parts []*AppParts, store *repository.Store) *broadcast.Apps {
	list := make([]*broadcast.App, len(parts))
	for i, p := range parts {
		list[i] = &broadcast.App{Name: p.Name, Engine: p.Engine, Store: store.ForApp(p.Name), RateLimit: p.RateLimit, Delivery: p.Delivery}
	}
	return broadcast.NewApps(list...)
}

func closeApps(parts []*AppParts) {
	for _, p := range parts {
		p.Sender.Close()
	}
}

// appBudgets are the request rules' apps: each app's rate limit.
func appBudgets(cfg config.Config) map[string]float64 {
	out := map[string]float64{}
	for _, a := range cfg.AppList() {
		out[a.Name] = a.RateLimit
	}
	return out
}

// appNames lists the apps' names (the metrics report each, at 0 when idle).
func appNames(parts []*AppParts) []string {
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.Name
	}
	return names
}
