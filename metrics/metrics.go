// Package metrics defines pushfan's Prometheus metrics, registered on an
// injected registry (never the global one), and adapts them to the hooks
// the engine and the broadcast service call.
package metrics

import (
	"database/sql"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics holds every collector.
type Metrics struct {
	// The sending metrics are per app (ForApp): each app has its own
	// engine, throttle and budget.
	sendAttempts    *prometheus.CounterVec
	sendDuration    *prometheus.HistogramVec
	inFlight        *prometheus.GaugeVec
	retries         *prometheus.CounterVec
	rateWait        *prometheus.CounterVec
	targets         *prometheus.CounterVec
	broadcasts      *prometheus.CounterVec
	broadcastTime   *prometheus.HistogramVec
	repaired        prometheus.Counter
	chunkClaims     *prometheus.CounterVec
	invalidations   prometheus.Counter
	checkpointFails prometheus.Counter
	checkpointTime  prometheus.Histogram
	events          *prometheus.CounterVec
	writeBackFails  prometheus.Counter
	workers         *prometheus.GaugeVec
	rateShare       *prometheus.GaugeVec
	rateMembers     *prometheus.GaugeVec
	hooksDisabled   *prometheus.CounterVec
	hooksLost       *prometheus.CounterVec
	summaryFails    *prometheus.CounterVec
	capped          *prometheus.CounterVec
	capReleased     *prometheus.CounterVec
	capExceeded     *prometheus.CounterVec
	staleSkipped    *prometheus.CounterVec
}

// New registers pushfan's collectors, the Go runtime and process collectors,
// and (if db is non-nil) the database pool's stats on reg.
func New(reg prometheus.Registerer, db *sql.DB) *Metrics {
	m := &Metrics{
		sendAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_fcm_send_attempts_total",
			Help: "Sends to FCM by outcome class (success, dead, transient, fatal) and FCM error code (OK on success). Each engine attempt counts once; the SDK's own retries inside it are not separate.",
		}, []string{"app", "outcome", "code"}),
		sendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pushfan_fcm_send_duration_seconds",
			Help:    "Duration of one send attempt to FCM, including the SDK's own retry waits.",
			Buckets: []float64{.005, .01, .02, .03, .04, .05, .075, .1, .15, .25, .5, 1, 2.5, 5, 10},
		}, []string{"app"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pushfan_fcm_sends_in_flight",
			Help: "Sends to FCM currently waiting for an answer.",
		}, []string{"app"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_fcm_retries_total",
			Help: "Targets re-queued for another attempt after a transient failure.",
		}, []string{"app"}),
		rateWait: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_rate_limiter_wait_seconds_total",
			Help: "Time workers spent waiting for the app's rate limiter (including 429 pauses).",
		}, []string{"app"}),
		targets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_broadcast_targets_total",
			Help: "Targets whose final outcome was stored, by result (succeeded, failed, canceled) and error code (OK for succeeded, CANCELED for canceled). Equals the broadcasts' own counts.",
		}, []string{"app", "result", "code"}),
		broadcasts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_broadcasts_finished_total",
			Help: "Broadcasts finished by this instance, by final status and trigger.",
		}, []string{"app", "status", "trigger"}),
		broadcastTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pushfan_broadcast_duration_seconds",
			Help:    "Time from a broadcast's start to its end, for broadcasts this instance finished.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 14),
		}, []string{"app"}),
		repaired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pushfan_broadcasts_repaired_total",
			Help: "Broadcasts the self-repair finished: every chunk of theirs was done while their open_chunks counter kept them open (chunks ended by an older release beside this one). Any increase is worth a look at the logs.",
		}),
		chunkClaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_chunk_claims_total",
			Help: "Chunks claimed by this instance; takeover=\"true\" when the previous holder's lease had expired.",
		}, []string{"takeover"}),
		invalidations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pushfan_tokens_invalidated_total",
			Help: "Device tokens marked invalid because FCM called them dead.",
		}),
		checkpointFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pushfan_checkpoint_failures_total",
			Help: "Chunk checkpoints that could not be stored (retried at the next one).",
		}),
		checkpointTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pushfan_checkpoint_duration_seconds",
			Help:    "Duration of one chunk checkpoint's transaction (stored or not): every running chunk stores one every PUSHFAN_FLUSH_INTERVAL, so a slow one holds the sends behind the store gate.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_events_ingested_total",
			Help: "Engagement events POST /v1/events committed, by result: stored, or duplicate (already stored).",
		}, []string{"result"}),
		writeBackFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pushfan_writeback_failures_total",
			Help: "Dead tokens whose write-back to a mapped schema's table (schema.tokens.on_dead) kept failing, stored without it (their failure rows are stored). Equals the broadcasts' writeback_failures.",
		}),
		workers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pushfan_fcm_workers",
			Help: "Sending goroutines now: the pool follows the rate times the send latency, within PUSHFAN_CONCURRENCY.",
		}, []string{"app"}),
		rateShare: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pushfan_rate_share",
			Help: "This instance's share of the FCM project's rate budget, in messages per second.",
		}, []string{"app"}),
		hooksDisabled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_webhook_endpoints_disabled_total",
			Help: "Webhook endpoints disabled after an event of theirs failed for a day (GET /push/webhooks says which are disabled now).",
		}, []string{"endpoint"}),
		hooksLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_webhook_lost_claims_total",
			Help: "Webhook attempts whose result was dropped because another instance had taken the event over meanwhile (the attempt outlived its claim: a stalled instance or database). That instance records its own attempt.",
		}, []string{"endpoint"}),
		summaryFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_webhook_summary_failures_total",
			Help: "broadcast.engagement summaries that failed to be written; each is retried with backoff, and the pass goes on with the other broadcasts.",
		}, []string{"stage"}),
		capped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_sends_capped_total",
			Help: "Targets withheld by a frequency cap (their user had had the cap's sends in its window), stored as an outcome. Equals the broadcasts' capped.",
		}, []string{"app"}),
		capReleased: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_frequency_cap_released_total",
			Help: "Users whose frequency-cap slot was given back at a checkpoint because none of their devices was sent (canceled, failed for good, dead tokens).",
		}, []string{"app"}),
		capExceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_frequency_cap_exceeded_total",
			Help: "Users sent a broadcast past a frequency cap: a device of theirs was sent without its slot, and another broadcast had taken the slot meanwhile. The ledger's holds keep it at 0; anything else is a bug to report.",
		}, []string{"app"}),
		staleSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pushfan_stale_tokens_skipped_total",
			Help: "Tokens a broadcast's send left out as stale (PUSHFAN_STALE_AFTER: not refreshed for that long), counted as its pages are read; a chunk resumed after a crash may count a page again.",
		}, []string{"app"}),
		rateMembers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pushfan_rate_members",
			Help: "Instances sending to the FCM project that the budget is split between (this one included).",
		}, []string{"app"}),
	}
	reg.MustRegister(m.sendAttempts, m.sendDuration, m.inFlight, m.retries, m.rateWait, m.targets,
		m.broadcasts, m.broadcastTime, m.repaired, m.chunkClaims, m.invalidations, m.checkpointFails, m.checkpointTime, m.events, m.writeBackFails, m.workers, m.rateShare, m.rateMembers, m.hooksDisabled, m.hooksLost, m.summaryFails,
		m.capped, m.capReleased, m.capExceeded, m.staleSkipped,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if db != nil {
		reg.MustRegister(collectors.NewDBStatsCollector(db, "pushfan"))
	}
	// Series that alerts and the dashboard name exist from the start, at 0:
	// a rate over them is 0, not empty, before the first event.
	m.chunkClaims.WithLabelValues("true")
	m.chunkClaims.WithLabelValues("false")
	m.events.WithLabelValues("stored")
	m.events.WithLabelValues("duplicate")
	return m
}

// classSuccess is the engine's name of an accepted send's class.
const classSuccess = "success"

// App is one app's sending metrics (its series of the app-labelled
// collectors, resolved once): it implements fanout.Metrics for the app's
// engine, and Share for its budget.
type App struct {
	sendAttempts *prometheus.CounterVec
	sendOK       prometheus.Counter // pre-resolved: the hot path's common case
	sendDuration prometheus.Observer
	inFlight     prometheus.Gauge
	retries      prometheus.Counter
	rateWait     prometheus.Counter
	workers      prometheus.Gauge
	rateShare    prometheus.Gauge
	rateMembers  prometheus.Gauge
}

// ForApp returns app's sending metrics.
func (m *Metrics) ForApp(app string) *App {
	// The app's outcome series exist from the start, at 0: an alert on the
	// exceeded cap (or a rate of capped sends) sees a series before the
	// first event.
	m.capped.WithLabelValues(app)
	m.capReleased.WithLabelValues(app)
	m.capExceeded.WithLabelValues(app)
	m.staleSkipped.WithLabelValues(app)
	// And the 429s: a series born at its first value hides that first
	// burst from rate() and increase(), the 429 panel and alert.
	m.sendAttempts.WithLabelValues(app, "transient", "QUOTA_EXCEEDED")
	return &App{
		sendAttempts: m.sendAttempts.MustCurryWith(prometheus.Labels{"app": app}),
		sendOK:       m.sendAttempts.WithLabelValues(app, classSuccess, "OK"),
		sendDuration: m.sendDuration.WithLabelValues(app),
		inFlight:     m.inFlight.WithLabelValues(app),
		retries:      m.retries.WithLabelValues(app),
		rateWait:     m.rateWait.WithLabelValues(app),
		workers:      m.workers.WithLabelValues(app),
		rateShare:    m.rateShare.WithLabelValues(app),
		rateMembers:  m.rateMembers.WithLabelValues(app),
	}
}

// Workers implements fanout.Metrics.
func (m *App) Workers(n int) { m.workers.Set(float64(n)) }

// Share reports this instance's share of the app's rate budget (package quota).
func (m *App) Share(perSecond float64, members int) {
	m.rateShare.Set(perSecond)
	m.rateMembers.Set(float64(members))
}

// SendStarted implements fanout.Metrics.
func (m *App) SendStarted() { m.inFlight.Inc() }

// SendDone implements fanout.Metrics.
func (m *App) SendDone(d time.Duration, class, code string) {
	m.inFlight.Dec()
	m.sendDuration.Observe(d.Seconds())
	if class == classSuccess {
		m.sendOK.Inc()
		return
	}
	m.sendAttempts.WithLabelValues(class, code).Inc()
}

// Retried implements fanout.Metrics.
func (m *App) Retried() { m.retries.Inc() }

// RateWaited implements fanout.Metrics.
func (m *App) RateWaited(d time.Duration) { m.rateWait.Add(d.Seconds()) }

// Capped counts targets withheld by a frequency cap, users released from
// their reservations, and users sent past a cap, as a checkpoint stored
// them.
func (m *Metrics) Capped(app string, capped, released, exceeded int64) {
	if capped > 0 {
		m.capped.WithLabelValues(app).Add(float64(capped))
	}
	if released > 0 {
		m.capReleased.WithLabelValues(app).Add(float64(released))
	}
	if exceeded > 0 {
		m.capExceeded.WithLabelValues(app).Add(float64(exceeded))
	}
}

// StaleSkipped counts tokens a send left out as stale.
func (m *Metrics) StaleSkipped(app string, n int) {
	if n > 0 {
		m.staleSkipped.WithLabelValues(app).Add(float64(n))
	}
}

// Committed counts targets whose outcome a checkpoint stored.
func (m *Metrics) Committed(app string, succeeded, canceled int64, failed map[string]int64, invalidated int64) {
	if succeeded > 0 {
		m.targets.WithLabelValues(app, "succeeded", "OK").Add(float64(succeeded))
	}
	if canceled > 0 {
		m.targets.WithLabelValues(app, "canceled", "CANCELED").Add(float64(canceled))
	}
	for code, n := range failed {
		if n > 0 {
			m.targets.WithLabelValues(app, "failed", code).Add(float64(n))
		}
	}
	if invalidated > 0 {
		m.invalidations.Add(float64(invalidated))
	}
}

// BroadcastFinished counts a broadcast this instance finished.
func (m *Metrics) BroadcastFinished(app, status, trigger string, took time.Duration) {
	m.broadcasts.WithLabelValues(app, status, trigger).Inc()
	m.broadcastTime.WithLabelValues(app).Observe(took.Seconds())
}

// BroadcastRepaired counts a broadcast the self-repair finished.
func (m *Metrics) BroadcastRepaired() { m.repaired.Inc() }

// ChunkClaimed counts a claim.
func (m *Metrics) ChunkClaimed(takeover bool) {
	if takeover {
		m.chunkClaims.WithLabelValues("true").Inc()
	} else {
		m.chunkClaims.WithLabelValues("false").Inc()
	}
}

// CheckpointTook observes one checkpoint's transaction, stored or not.
func (m *Metrics) CheckpointTook(d time.Duration) { m.checkpointTime.Observe(d.Seconds()) }

// EventsIngested counts engagement events a group commit stored, and those
// it found already stored.
func (m *Metrics) EventsIngested(stored, duplicates int) {
	if stored > 0 {
		m.events.WithLabelValues("stored").Add(float64(stored))
	}
	if duplicates > 0 {
		m.events.WithLabelValues("duplicate").Add(float64(duplicates))
	}
}

// CheckpointFailed counts a checkpoint that was not stored.
func (m *Metrics) CheckpointFailed() { m.checkpointFails.Inc() }

// WriteBackSkipped counts dead tokens stored without their write-back.
func (m *Metrics) WriteBackSkipped(n int64) {
	if n > 0 {
		m.writeBackFails.Add(float64(n))
	}
}

// WebhookDisabled counts an endpoint disabled after failing for a day.
func (m *Metrics) WebhookDisabled(endpoint string) { m.hooksDisabled.WithLabelValues(endpoint).Inc() }

// WebhookLostClaim counts an attempt's result dropped: its claim was lost.
func (m *Metrics) WebhookLostClaim(endpoint string) { m.hooksLost.WithLabelValues(endpoint).Inc() }

// WebhookSummaryFailed counts an engagement summary that failed (retried).
func (m *Metrics) WebhookSummaryFailed(stage string) { m.summaryFails.WithLabelValues(stage).Inc() }
