package webhook

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"pushfan/internal/platform/lifecycle"
	"pushfan/internal/platform/sqldb"
)

// SummaryStages are when broadcast.engagement is sent: an hour and a day
// after the broadcast finished.
var SummaryStages = []time.Duration{time.Hour, 24 * time.Hour}

// SummaryGrace is how late a summary may still go out: a deployment that
// was down longer than this after a stage was due skips it rather than
// telling the app about a day-old broadcast as if it were news.
const SummaryGrace = 6 * time.Hour

// Finished is a broadcast that finished: when, and its id. Summaries go
// in this order (time, then id), and a stage's cursor is one of these.
type Finished struct {
	At time.Time
	ID uint64
}

// SummarySource gives the summaries their broadcasts and one's summary
// data (nil: none to send, as for a broadcast that carried no event
// token).
type SummarySource interface {
	// FinishedAfter lists, in finish order, up to limit broadcasts that
	// finished after cursor and before to, having sent something.
	FinishedAfter(ctx context.Context, cursor Finished, to time.Time, limit int) ([]Finished, error)
	Summary(ctx context.Context, id uint64, after time.Duration) (any, error)
}

// Summaries writes broadcast.engagement events: any instance, each stage
// of each broadcast once. A stage's pass (summary_pass.go) is held by one
// instance at a time and goes on from the stage's cursor, so each
// broadcast is looked at once per stage, whether it has a summary to
// send or not; a summary that fails is retried with backoff (summary_retry.go)
// while the pass goes on. The event's webhook-id is derived from the
// broadcast, the stage and the endpoint, and the outbox's unique key on
// it keeps one row whoever writes it.
type Summaries struct {
	db     *sql.DB
	out    *Outbox
	src    SummarySource
	every  time.Duration
	log    *slog.Logger
	now    func() time.Time
	loop   lifecycle.Loop
	stages []time.Duration

	// OnFailed, if set, is told when a summary failed (it is retried
	// later): a metric, by stage ("1h", "24h").
	OnFailed func(stage string)
}

// NewSummaries looks for due summaries every every (and once at start).
func NewSummaries(db *sql.DB, out *Outbox, src SummarySource, every time.Duration, log *slog.Logger) *Summaries {
	return &Summaries{db: db, out: out, src: src, every: every, log: log, now: time.Now, stages: SummaryStages}
}

// Start starts the passes (nothing when no endpoint wants the summaries).
func (s *Summaries) Start(ctx context.Context) {
	if !s.out.Wants(BroadcastEngagement) {
		return
	}
	s.loop.Start(ctx, s.run)
}

// Stop ends the passes and waits for one in progress (up to ctx).
func (s *Summaries) Stop(ctx context.Context) error { return s.loop.Stop(ctx) }

func (s *Summaries) run(ctx context.Context) {
	wait := time.Duration(0)
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if n, err := s.RunOnce(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("webhooks: an engagement summaries pass failed; the next pass goes on from where it stopped", "err", err)
		} else if n > 0 {
			s.log.Info("webhooks: engagement summaries written", "events", n)
		}
		// Jitter spreads the instances' passes.
		wait = s.every + time.Duration(rand.Int64N(int64(s.every/10)+1))
	}
}

// RunOnce runs a pass of each stage and returns how many rows they added.
// A stage whose pass fails (its database) does not keep the other from
// its own.
func (s *Summaries) RunOnce(ctx context.Context) (int, error) {
	added := 0
	var errs []error
	for _, after := range s.stages {
		n, err := s.pass(ctx, after)
		added += n
		if err != nil {
			errs = append(errs, fmt.Errorf("engagement summaries at %s: %w", StageName(after), err))
		}
	}
	return added, errors.Join(errs...)
}

// summaryBatch bounds the broadcasts of one step of a pass, and the
// webhook-ids looked up in one query.
const summaryBatch = 500

// missing finds, among ids' summaries at stage after, those not written
// yet, by endpoint: another instance may have written them (the previous
// release, which looks at the whole window every pass, or a pass that
// stopped before it moved the cursor). The lookup is by batches of
// webhook-ids on the outbox's unique key, never a query per broadcast.
func (s *Summaries) missing(ctx context.Context, ids []uint64, after time.Duration) (map[uint64][]*Endpoint, error) {
	type want struct {
		id uint64
		e  *Endpoint
	}
	wants := map[string]want{}
	var keys []any
	for _, id := range ids {
		for _, e := range s.out.endpoints {
			if e.Wants(BroadcastEngagement) {
				m := summaryMsgID(id, after, e.Name)
				wants[m] = want{id, e}
				keys = append(keys, m)
			}
		}
	}
	for len(keys) > 0 {
		batch := keys[:min(len(keys), summaryBatch)]
		keys = keys[len(batch):]
		rows, err := s.db.QueryContext(ctx, "SELECT msg_id FROM webhook_outbox WHERE msg_id IN ("+sqldb.InList(len(batch))+")", batch...)
		if err != nil {
			return nil, fmt.Errorf("engagement summaries written: %w", err)
		}
		for rows.Next() {
			var m string
			if err := rows.Scan(&m); err != nil {
				rows.Close()
				return nil, fmt.Errorf("engagement summaries written: %w", err)
			}
			delete(wants, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("engagement summaries written: %w", err)
		}
	}
	out := map[uint64][]*Endpoint{}
	for _, w := range wants {
		out[w.id] = append(out[w.id], w.e)
	}
	return out, nil
}

// write adds broadcast id's summary at stage after for endpoints (those
// found without one).
func (s *Summaries) write(ctx context.Context, id uint64, after time.Duration, endpoints []*Endpoint) (int, error) {
	data, err := s.src.Summary(ctx, id, after)
	if err != nil {
		return 0, fmt.Errorf("engagement summary of %d: %w", id, err)
	}
	if data == nil {
		return 0, nil // the source has nothing to tell (an untracked broadcast)
	}
	body, err := json.Marshal(envelope{Type: BroadcastEngagement, Timestamp: s.now().UTC(), Data: data})
	if err != nil {
		return 0, fmt.Errorf("webhook: encoding %s: %w", BroadcastEngagement, err)
	}
	// One transaction for the endpoints, retried after a lock conflict with
	// the deliverers' claims (InTx); IGNORE: another instance wrote a row
	// since the lookup.
	added := 0
	err = sqldb.InTx(ctx, s.db, s.log, "write engagement summary", func(tx *sql.Tx) error {
		added = 0
		for _, e := range endpoints {
			res, err := tx.ExecContext(ctx, "INSERT IGNORE INTO webhook_outbox (msg_id, endpoint, type, broadcast_id, body) VALUES (?, ?, ?, ?, ?)",
				summaryMsgID(id, after, e.Name), e.Name, BroadcastEngagement, id, body)
			if err != nil {
				return fmt.Errorf("webhook: writing %s for %s: %w", BroadcastEngagement, e.Name, err)
			}
			if n, _ := res.RowsAffected(); n > 0 {
				added++
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return added, nil
}

// summaryMsgID is the webhook-id of broadcast id's summary at after for
// endpoint: the same on every instance, and "msg_" and 128 bits like the
// others.
func summaryMsgID(id uint64, after time.Duration, endpoint string) string {
	h := sha256.New()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], id)
	binary.BigEndian.PutUint64(b[8:], uint64(after))
	h.Write(b[:])
	h.Write([]byte(endpoint))
	return "msg_" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h.Sum(nil)[:16])
}

// StageName is a stage as broadcast.engagement's data says it: "1h", "24h".
func StageName(after time.Duration) string {
	return fmt.Sprintf("%dh", int(after/time.Hour))
}
