package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"pushfan/internal/platform/sqldb"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
	"pushfan/retention"
)

// The retention phase of the scale run (SCALE_PHASES=retention to run it
// alone; issue 38, defect 1): RETENTION_EVENTS engagement events (10M by
// default) of broadcasts that finished past the retention, and one
// broadcast sending: retentionWorkers chunks checkpointing back to back
// (package lease's Checkpoint, what a running chunk stores every flush)
// and a group of its engagement events stored every 50 ms (package
// repository's StoreEvents, the events' group commit). The checkpoints'
// latency is measured for retentionQuiet without a retention pass, then
// while one runs (package retention, at its defaults), until it ends or
// RETENTION_WINDOW passes, then for retentionQuiet again (the baseline is
// both quiet windows). Target: p99 with the pass ≤ 1.5 × p99
// without, and no lock wait timeout (1205) anywhere.
type retentionReport struct {
	Events            int     `json:"events"`
	BufferPoolMB      float64 `json:"buffer_pool_mb"`
	ExpiredBroadcasts int     `json:"expired_broadcasts"`
	SeedSeconds       float64 `json:"seed_seconds"`
	// Checkpoint latency without and with the pass, ms.
	QuietCheckpoints, PassCheckpoints int
	QuietP50MS, QuietP99MS            float64
	PassP50MS, PassP99MS              float64
	P99Ratio                          float64
	// The events' group commits, ms.
	QuietEventsP99MS, PassEventsP99MS float64
	// Lock wait timeouts (1205) met by a checkpoint or an event group,
	// retried or not.
	LockTimeouts int64
	// What the pass did in the window.
	PassSeconds      float64
	PassDone         bool
	PurgedBroadcasts int
	EventsLeft       int64
}

const (
	retentionWorkers   = 4
	retentionQuiet     = 45 * time.Second
	retentionPerExpire = 200_000 // events per expired broadcast
)

func (b *bench) runRetention(ctx context.Context, rep *report) error {
	rr := &retentionReport{Events: b.o.retentionEvents}
	rep.Retention = rr
	bdb, err := dbFor("pushfan_bench_retention", rr.Events)
	if err != nil {
		return err
	}
	// Every run deletes what it seeded: start from an empty database.
	if err := dropDB(ctx, bdb.name); err != nil {
		return err
	}
	if err := sqldb.EnsureDatabase(ctx, bdb.dsn); err != nil {
		return err
	}
	locks := &lockCounter{}
	log := slog.New(locks)
	db, err := sqldb.Open(ctx, bdb.dsn, 32, log)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := repository.Migrate(ctx, db.DB, nil); err != nil {
		return err
	}
	t0 := time.Now()
	running, err := seedRetention(ctx, db, rr)
	if err != nil {
		return err
	}
	rr.SeedSeconds = time.Since(t0).Seconds()
	b.logf("  retention: seeded %d events of %d expired broadcasts in %.0f s", rr.Events, rr.ExpiredBroadcasts, rr.SeedSeconds)
	// As the rest of the scale run: a buffer pool that holds the tables
	// (else the run measures the disk).
	pool := &scaleReport{}
	restore, err := b.fitBufferPool(ctx, bdb, pool)
	if err != nil {
		return err
	}
	defer restore()
	rr.BufferPoolMB = pool.BufferPoolMB

	send := &retentionSender{db: db, store: repository.New(db, log), leases: lease.New(db.DB, log), id: running, locks: locks}
	claims, err := send.claim(ctx)
	if err != nil {
		return err
	}
	quiet, quietEvents, err := send.measure(ctx, claims, func(ctx context.Context) error { return sleep(ctx, retentionQuiet) })
	if err != nil {
		return err
	}
	pass := func(ctx context.Context) error {
		wctx, cancel := context.WithTimeout(ctx, b.o.retentionWindow)
		defer cancel()
		r := retention.New(repository.New(db, log), log, retention.Options{Keep: 90 * 24 * time.Hour})
		t0 := time.Now()
		res, err := r.RunOnce(wctx)
		rr.PassSeconds = time.Since(t0).Seconds()
		rr.PurgedBroadcasts = res.Broadcasts
		rr.PassDone = err == nil
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("the retention pass: %w", err)
		}
		return nil
	}
	during, duringEvents, err := send.measure(ctx, claims, pass)
	if err != nil {
		return err
	}
	// The baseline is measured before and after the pass, half each:
	// on a shared machine the load drifts over the pass's minutes.
	after, afterEvents, err := send.measure(ctx, claims, func(ctx context.Context) error { return sleep(ctx, retentionQuiet) })
	if err != nil {
		return err
	}
	quiet, quietEvents = append(quiet, after...), append(quietEvents, afterEvents...)
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM engagement_events WHERE broadcast_id <> ?", running).Scan(&rr.EventsLeft); err != nil {
		return err
	}
	rr.QuietCheckpoints, rr.PassCheckpoints = len(quiet), len(during)
	rr.QuietP50MS, rr.QuietP99MS = quantileMS(quiet, 0.50), quantileMS(quiet, 0.99)
	rr.PassP50MS, rr.PassP99MS = quantileMS(during, 0.50), quantileMS(during, 0.99)
	rr.QuietEventsP99MS, rr.PassEventsP99MS = quantileMS(quietEvents, 0.99), quantileMS(duringEvents, 0.99)
	if rr.QuietP99MS > 0 {
		rr.P99Ratio = rr.PassP99MS / rr.QuietP99MS
	}
	rr.LockTimeouts = locks.n.Load()
	rep.Targets = append(rep.Targets,
		target{Name: "checkpoint p99 during a retention pass", Want: "≤ 1.5× without", Got: fmt.Sprintf("%.2f×", rr.P99Ratio), Met: rr.P99Ratio <= 1.5},
		target{Name: "lock wait timeouts beside a retention pass", Want: "0", Got: fmt.Sprint(rr.LockTimeouts), Met: rr.LockTimeouts == 0},
	)
	b.logf("  retention: checkpoint p99 %.1f ms without a pass, %.1f ms with (%.2fx); %d lock wait timeouts; the pass deleted %d broadcasts in %.0f s (done: %v)",
		rr.QuietP99MS, rr.PassP99MS, rr.P99Ratio, rr.LockTimeouts, rr.PurgedBroadcasts, rr.PassSeconds, rr.PassDone)
	return nil
}

// seedRetention writes rr.Events engagement events of expired broadcasts
// (finished 100 days ago), retentionPerExpire each, with failures, send
// rates, series minutes and delivered webhooks in proportion, then the
// running broadcast with its chunks, and returns its id.
func seedRetention(ctx context.Context, db *sqlx.DB, rr *retentionReport) (uint64, error) {
	rr.ExpiredBroadcasts = max(1, rr.Events/retentionPerExpire)
	for i := range rr.ExpiredBroadcasts {
		res, err := db.ExecContext(ctx, `INSERT INTO broadcasts (message, audience, status, targeted, succeeded, started_at, finished_at)
			VALUES ('{}', '{"all":true}', 'completed', ?, ?, UTC_TIMESTAMP(6) - INTERVAL 100 DAY, UTC_TIMESTAMP(6) - INTERVAL 100 DAY)`, retentionPerExpire, retentionPerExpire)
		if err != nil {
			return 0, fmt.Errorf("seed: %w", err)
		}
		id, _ := res.LastInsertId()
		n := rr.Events/rr.ExpiredBroadcasts + boolInt(i < rr.Events%rr.ExpiredBroadcasts)
		// The events 50,000 at a time: one INSERT … SELECT of them all
		// can run out of lock memory on a small buffer pool (1206).
		for lo := 0; lo < n; lo += 50_000 {
			if _, err := db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO engagement_events (broadcast_id, target_id, type, user_id, variant, localized, sent_at, at)
				SELECT %d, seq, 1, seq, 0, 0, '2026-01-01', '2026-01-01' FROM seq_%d_to_%d`, id, lo+1, min(n, lo+50_000))); err != nil {
				return 0, fmt.Errorf("seed: %w", err)
			}
		}
		for _, q := range []string{
			"INSERT INTO engagement_counts (broadcast_id, variant, localized, type, n) VALUES (%[1]d, 0, 0, 1, %[2]d)",
			"INSERT INTO broadcast_failures (broadcast_id, token_id, user_id, code) SELECT %[1]d, seq, seq, 'UNREGISTERED' FROM seq_1_to_%[3]d",
			"INSERT INTO send_rate (broadcast_id, at, n) SELECT %[1]d, '2026-01-01' + INTERVAL seq SECOND, 100 FROM seq_1_to_%[3]d",
			"INSERT INTO engagement_series (broadcast_id, type, minute, n) SELECT %[1]d, 1, '2026-01-01' + INTERVAL seq MINUTE, 1 FROM seq_1_to_%[3]d",
			"INSERT INTO webhook_outbox (msg_id, endpoint, type, broadcast_id, body, status) SELECT CONCAT(%[1]d, '-', seq), 'e', 'x', %[1]d, '{}', 'delivered' FROM seq_1_to_%[4]d",
		} {
			if _, err := db.ExecContext(ctx, fmt.Sprintf(q, id, n, max(1, n/100), max(1, n/1000))); err != nil {
				return 0, fmt.Errorf("seed: %w", err)
			}
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `INSERT INTO broadcasts (message, audience, status, started_at) VALUES ('{}', '{"all":true}', 'running', UTC_TIMESTAMP(6))`)
	if err != nil {
		return 0, fmt.Errorf("seed: %w", err)
	}
	id, _ := res.LastInsertId()
	const span = uint64(1) << 36
	plans := make([]lease.Plan, retentionWorkers)
	for i := range plans {
		plans[i] = lease.Plan{Seq: i, Lo: uint64(i) * span, Hi: uint64(i+1) * span, Targets: int64(span)}
	}
	if err := lease.InsertChunks(ctx, tx, uint64(id), lease.Bulk, plans); err != nil {
		return 0, fmt.Errorf("seed: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return uint64(id), nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// retentionSender is the sending broadcast: its chunks' checkpoints and
// its events.
type retentionSender struct {
	db     *sqlx.DB
	store  *repository.Store
	leases *lease.Store
	id     uint64
	locks  *lockCounter
	target atomic.Uint64 // the next event's target
}

func (s *retentionSender) claim(ctx context.Context) ([]*lease.Claim, error) {
	var cs []*lease.Claim
	for range retentionWorkers {
		c, err := s.leases.Claim(ctx, lease.ClaimOptions{Owner: "bench-retention", Lease: 10 * time.Minute})
		if err != nil || c == nil {
			return nil, fmt.Errorf("claim a chunk of the sending broadcast: %v, %w", c, err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// measure checkpoints every claim back to back, and stores a group of
// events every 50 ms, while during runs; it returns the checkpoints' and
// the event groups' latencies.
func (s *retentionSender) measure(ctx context.Context, claims []*lease.Claim, during func(context.Context) error) (ckpts, events []time.Duration, err error) {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		stop()
	}
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Go(func() {
			for wctx.Err() == nil {
				cp := lease.Checkpoint{Cursor: c.Cursor + 100, Succeeded: 100, End: lease.KeepLease, Lease: 10 * time.Minute}
				t0 := time.Now()
				_, err := s.leases.Checkpoint(wctx, c, cp)
				took := time.Since(t0)
				if wctx.Err() != nil {
					return
				}
				if err != nil {
					s.locks.count(err)
					fail(fmt.Errorf("checkpoint: %w", err))
					return
				}
				mu.Lock()
				ckpts = append(ckpts, took)
				mu.Unlock()
				if sleep(wctx, 10*time.Millisecond) != nil {
					return
				}
			}
		})
	}
	wg.Go(func() {
		for wctx.Err() == nil {
			evs := make([]model.EngagementEvent, 100)
			now := time.Now().UTC()
			for i := range evs {
				t := s.target.Add(1)
				evs[i] = model.EngagementEvent{BroadcastID: s.id, Target: t, UserID: t, Type: model.EventOpened, Sent: now.Add(-time.Minute), At: now}
			}
			t0 := time.Now()
			_, err := s.store.StoreEvents(wctx, evs)
			took := time.Since(t0)
			if wctx.Err() != nil {
				return
			}
			if err != nil {
				s.locks.count(err)
				fail(fmt.Errorf("store events: %w", err))
				return
			}
			mu.Lock()
			events = append(events, took)
			mu.Unlock()
			if sleep(wctx, 50*time.Millisecond) != nil {
				return
			}
		}
	})
	derr := during(wctx)
	stop()
	wg.Wait()
	if derr != nil {
		return nil, nil, derr
	}
	if firstErr != nil {
		return nil, nil, firstErr
	}
	return ckpts, events, nil
}

// quantileMS is the q quantile of ds, in ms.
func quantileMS(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return ms(s[min(len(s)-1, int(q*float64(len(s))))])
}

// lockCounter counts lock wait timeouts (1205): those a transaction was
// retried after (sqldb.InTx logs each retry) and those returned.
type lockCounter struct {
	n atomic.Int64
}

func (l *lockCounter) count(err error) {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1205 {
		l.n.Add(1)
	}
}

func (l *lockCounter) Enabled(context.Context, slog.Level) bool { return true }

func (l *lockCounter) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" && strings.Contains(a.Value.String(), "1205") {
			l.n.Add(1)
		}
		return true
	})
	return nil
}

func (l *lockCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lockCounter) WithGroup(string) slog.Handler      { return l }

func (rr *retentionReport) print(w io.Writer) {
	fmt.Fprintf(w, "retention beside a sending broadcast (%d engagement events of %d expired broadcasts; %d chunks checkpointing back to back, events stored every 50 ms; buffer pool %.0f MB):\n",
		rr.Events, rr.ExpiredBroadcasts, retentionWorkers, rr.BufferPoolMB)
	fmt.Fprintf(w, "  checkpoint latency without a pass: p50 %.1f ms, p99 %.1f ms (%d checkpoints)\n", rr.QuietP50MS, rr.QuietP99MS, rr.QuietCheckpoints)
	fmt.Fprintf(w, "  checkpoint latency during the pass: p50 %.1f ms, p99 %.1f ms (%d checkpoints)\n", rr.PassP50MS, rr.PassP99MS, rr.PassCheckpoints)
	fmt.Fprintf(w, "  p99 with/without: %.2f (target ≤ 1.5); event group p99 %.1f ms without, %.1f ms with\n", rr.P99Ratio, rr.QuietEventsP99MS, rr.PassEventsP99MS)
	fmt.Fprintf(w, "  lock wait timeouts (1205): %d (target 0)\n", rr.LockTimeouts)
	fmt.Fprintf(w, "  the pass: %d broadcasts deleted in %.0f s (finished: %v), %d expired events left\n", rr.PurgedBroadcasts, rr.PassSeconds, rr.PassDone, rr.EventsLeft)
}
