package app

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"pushfan/broadcast/reads"
	"pushfan/config"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
	"pushfan/server"
	"pushfan/webhook"
)

// compileWebhooks compiles the config's webhook endpoints.
func compileWebhooks(cfg config.Config) ([]*webhook.Endpoint, error) {
	cs := make([]webhook.Config, len(cfg.Webhooks))
	for i, w := range cfg.Webhooks {
		cs[i] = webhook.Config{Name: w.Name, URL: w.URL, Secret: w.Secret, Events: w.Events}
	}
	eps, err := webhook.Compile(cs)
	if err != nil {
		return nil, fmt.Errorf("PUSHFAN_CONFIG: %w", err)
	}
	return eps, nil
}

// webhookDeliverer delivers the outbox to the endpoints, retrying on
// PUSHFAN_WEBHOOK_RETRY_SCHEDULE.
func webhookDeliverer(cfg config.Config, db *sql.DB, eps []*webhook.Endpoint, log *slog.Logger) (*webhook.Deliverer, error) {
	retry, err := config.ParseRetrySchedule(cfg.WebhookRetrySchedule)
	if err != nil {
		return nil, fmt.Errorf("PUSHFAN_WEBHOOK_RETRY_SCHEDULE: %w", err)
	}
	return webhook.NewDeliverer(db, eps, webhook.NewClient(cfg.WebhookTimeout, cfg.WebhookAllowPrivate), cfg.WebhookTimeout, time.Second, retry, log), nil
}

// outboxEvents writes lease's transition events to the webhook outbox,
// with the broadcast as the API shows it (render), read in the
// transition's transaction.
type outboxEvents struct {
	out    *webhook.Outbox
	render func(*model.Broadcast) any
}

func (o outboxEvents) BroadcastEvent(ctx context.Context, tx *sql.Tx, e lease.Event, id uint64) error {
	if !o.out.Wants(string(e)) {
		return nil
	}
	b, err := repository.GetBroadcastIn(ctx, tx, id)
	if err != nil {
		return fmt.Errorf("webhook %s: %w", e, err)
	}
	return o.out.Add(ctx, tx, string(e), id, o.render(b))
}

// invalidated writes tokens.invalidated events for a checkpoint's dead
// tokens, in its transaction.
func (o outboxEvents) invalidated(ctx context.Context, tx *sql.Tx, id uint64, dead []webhook.DeadToken) error {
	return o.out.AddInvalidated(ctx, tx, id, dead)
}

// summarySource gives the engagement summaries their broadcasts and data.
type summarySource struct {
	store *repository.Store
	reads *reads.Reader
}

func (s summarySource) FinishedAfter(ctx context.Context, cursor webhook.Finished, to time.Time, limit int) ([]webhook.Finished, error) {
	list, err := s.store.FinishedAfter(ctx, cursor.At, cursor.ID, to, limit)
	if err != nil {
		return nil, err
	}
	out := make([]webhook.Finished, len(list))
	for i, f := range list {
		out[i] = webhook.Finished{At: f.At, ID: f.ID}
	}
	return out, nil
}

func (s summarySource) Summary(ctx context.Context, id uint64, after time.Duration) (any, error) {
	return server.EngagementSummary(ctx, s.reads, id, webhook.StageName(after))
}

// endpointNames lists the configured webhook endpoints' names (the
// metrics report each, at 0 when it has no backlog and is enabled).
func endpointNames(cfg config.Config) []string {
	names := make([]string, len(cfg.Webhooks))
	for i, w := range cfg.Webhooks {
		names[i] = w.Name
	}
	return names
}
