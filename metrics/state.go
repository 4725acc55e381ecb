package metrics

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State reads, at each scrape, what the database says of the whole
// cluster: whether it answers (as /readyz asks), the chunks running and
// waiting per app, and the webhook backlog and disabled endpoints. Every
// instance reports the same cluster-wide values: a dashboard or an alert
// takes their max, never their sum.
//
// The queries read index ranges only (idx_chunks_pending,
// ix_webhook_waiting, the endpoints' primary key) and share one timeout,
// so a slow database costs a scrape at most that long; past it, or on an
// error, pushfan_database_up is 0 and the counts are left out.
type State struct {
	db        *sql.DB
	apps      []string // reported at 0 when they have no chunks
	endpoints []string // reported at 0 when they have no backlog
	timeout   time.Duration
	log       *slog.Logger

	up, chunks, backlog, disabled *prometheus.Desc
}

// NewState registers the cluster's state on reg, read from db at each
// scrape within timeout; apps and endpoints are the configured ones.
func NewState(reg prometheus.Registerer, db *sql.DB, apps, endpoints []string, timeout time.Duration, log *slog.Logger) *State {
	s := &State{db: db, apps: apps, endpoints: endpoints, timeout: timeout, log: log,
		up: prometheus.NewDesc("pushfan_database_up",
			"1 when the database answered this scrape's queries (what /readyz asks), 0 when it did not.", nil, nil),
		chunks: prometheus.NewDesc("pushfan_chunks",
			"Chunks of the whole cluster by app and state: running (leased by an instance) and waiting (pending: due, not claimed yet). Chunks not due yet (local time, quiet hours) are not counted.",
			[]string{"app", "state"}, nil),
		backlog: prometheus.NewDesc("pushfan_webhook_backlog",
			"Webhook events of the whole cluster waiting to be delivered (pending), by endpoint.", []string{"endpoint"}, nil),
		disabled: prometheus.NewDesc("pushfan_webhook_endpoint_disabled",
			"1 while a webhook endpoint is disabled (its events wait until it is enabled again), 0 otherwise.", []string{"endpoint"}, nil),
	}
	reg.MustRegister(s)
	return s
}

// Describe implements prometheus.Collector.
func (s *State) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.up
	ch <- s.chunks
	ch <- s.backlog
	ch <- s.disabled
}

// Collect implements prometheus.Collector.
func (s *State) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	chunks, backlog, disabled, err := s.read(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "metrics: reading the cluster's state for a scrape failed", "err", err)
		ch <- prometheus.MustNewConstMetric(s.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(s.up, prometheus.GaugeValue, 1)
	for _, app := range s.apps {
		for _, state := range []string{"running", "waiting"} {
			if _, ok := chunks[[2]string{app, state}]; !ok {
				chunks[[2]string{app, state}] = 0
			}
		}
	}
	for k, n := range chunks {
		ch <- prometheus.MustNewConstMetric(s.chunks, prometheus.GaugeValue, n, k[0], k[1])
	}
	for _, ep := range s.endpoints {
		if _, ok := backlog[ep]; !ok {
			backlog[ep] = 0
		}
		if _, ok := disabled[ep]; !ok {
			disabled[ep] = 0
		}
	}
	for ep, n := range backlog {
		ch <- prometheus.MustNewConstMetric(s.backlog, prometheus.GaugeValue, n, ep)
	}
	for ep, n := range disabled {
		ch <- prometheus.MustNewConstMetric(s.disabled, prometheus.GaugeValue, n, ep)
	}
}

// read runs the scrape's queries.
func (s *State) read(ctx context.Context) (chunks map[[2]string]float64, backlog, disabled map[string]float64, err error) {
	chunks = map[[2]string]float64{}
	err = s.each(ctx, `SELECT app, CASE status WHEN 'leased' THEN 'running' ELSE 'waiting' END, COUNT(*)
		FROM broadcast_chunks WHERE status IN ('pending', 'leased') GROUP BY app, status`,
		func(r *sql.Rows) error {
			var app, state string
			var n float64
			err := r.Scan(&app, &state, &n)
			chunks[[2]string{app, state}] = n
			return err
		})
	if err != nil {
		return nil, nil, nil, err
	}
	backlog = map[string]float64{}
	err = s.each(ctx, `SELECT endpoint, COUNT(*) FROM webhook_outbox WHERE status = 'pending' GROUP BY endpoint`,
		func(r *sql.Rows) error {
			var ep string
			var n float64
			err := r.Scan(&ep, &n)
			backlog[ep] = n
			return err
		})
	if err != nil {
		return nil, nil, nil, err
	}
	disabled = map[string]float64{}
	err = s.each(ctx, `SELECT name FROM webhook_endpoints WHERE disabled_at IS NOT NULL`,
		func(r *sql.Rows) error {
			var ep string
			err := r.Scan(&ep)
			disabled[ep] = 1
			return err
		})
	if err != nil {
		return nil, nil, nil, err
	}
	return chunks, backlog, disabled, nil
}

// each runs query and calls scan for every row.
func (s *State) each(ctx context.Context, query string, scan func(*sql.Rows) error) error {
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("%.40s…: %w", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("%.40s…: %w", query, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%.40s…: %w", query, err)
	}
	return nil
}
