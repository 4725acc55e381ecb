package repository

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// eventKey is an event's identity: one per broadcast, target and type.
type eventKey struct {
	broadcast, target uint64
	typ               model.EventType
}

// StoreEvents stores the events that are new and adds them to their
// broadcasts' counts, counts per platform (one statement more per commit:
// engagement_platform_counts), series and time-to-open histogram, all in one
// transaction (the group commit of package engagement), and returns what
// it did with each. An event whose broadcast does not exist is not stored.
//
// The transaction reads which of the keys exist, then inserts the others
// in one statement; should that insert fewer rows than it was given (an
// instance stored one of them meanwhile), the transaction is rolled back
// and run again, so the counts are always of the rows inserted.
func (s *Store) StoreEvents(ctx context.Context, evs []model.EngagementEvent) ([]model.EventResult, error) {
	res := make([]model.EventResult, len(evs))
	err := sqldb.InTx(ctx, s.db.DB, s.log, "store events", func(tx *sql.Tx) error {
		for i := range res {
			res[i] = model.EventStored
		}
		known, err := lockBroadcasts(ctx, tx, evs)
		if err != nil {
			return err
		}
		seen := make(map[eventKey]bool, len(evs))
		var keys []eventKey
		for i, e := range evs {
			k := eventKey{e.BroadcastID, e.Target, e.Type}
			switch {
			case !known[e.BroadcastID]:
				res[i] = model.EventUnknownBroadcast
			case seen[k]:
				res[i] = model.EventDuplicate // twice in one group
			default:
				seen[k] = true
				keys = append(keys, k)
			}
		}
		stored, err := existingEvents(ctx, tx, keys)
		if err != nil {
			return err
		}
		var fresh []model.EngagementEvent
		for i, e := range evs {
			if res[i] != model.EventStored {
				continue
			}
			k := eventKey{e.BroadcastID, e.Target, e.Type}
			if stored[k] || !seen[k] {
				res[i] = model.EventDuplicate
				continue
			}
			seen[k] = false // a later event of the same key in evs is a duplicate
			fresh = append(fresh, e)
		}
		return insertEvents(ctx, tx, fresh)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// lockBroadcasts reads which of the events' broadcasts exist, in share
// mode: retention, which deletes a broadcast with its events, waits for
// this transaction, so that no event outlives its broadcast.
func lockBroadcasts(ctx context.Context, tx *sql.Tx, evs []model.EngagementEvent) (map[uint64]bool, error) {
	ids := map[uint64]bool{}
	for _, e := range evs {
		ids[e.BroadcastID] = false
	}
	args := make([]any, 0, len(ids))
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		args = append(args, id)
	}
	rows, err := tx.QueryContext(ctx, "SELECT id FROM broadcasts WHERE id IN ("+sqldb.InList(len(args))+") LOCK IN SHARE MODE", args...)
	if err != nil {
		return nil, fmt.Errorf("events: reading their broadcasts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("events: reading their broadcasts: %w", err)
		}
		ids[id] = true
	}
	return ids, rows.Err()
}

// existingEvents returns which of keys are stored already.
func existingEvents(ctx context.Context, tx *sql.Tx, keys []eventKey) (map[eventKey]bool, error) {
	out := map[eventKey]bool{}
	for len(keys) > 0 {
		n := min(len(keys), MaxIDsPerRead/3)
		batch := keys[:n]
		keys = keys[n:]
		args := make([]any, 0, 3*n)
		for _, k := range batch {
			args = append(args, k.broadcast, k.target, uint8(k.typ))
		}
		q := "SELECT broadcast_id, target_id, type FROM engagement_events WHERE (broadcast_id, target_id, type) IN (" +
			strings.TrimSuffix(strings.Repeat("(?,?,?),", n), ",") + ")"
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("events: reading the stored ones: %w", err)
		}
		for rows.Next() {
			var k eventKey
			var typ uint8
			if err := rows.Scan(&k.broadcast, &k.target, &typ); err != nil {
				rows.Close()
				return nil, fmt.Errorf("events: reading the stored ones: %w", err)
			}
			k.typ = model.EventType(typ)
			out[k] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("events: reading the stored ones: %w", err)
		}
	}
	return out, nil
}

// insertEvents inserts fresh (none of them stored) and adds them to the
// counts, the counts per platform, the series and the histogram, in key
// order (two instances' group
// commits then lock the same rows in the same order).
func insertEvents(ctx context.Context, tx *sql.Tx, fresh []model.EngagementEvent) error {
	if len(fresh) == 0 {
		return nil
	}
	slices.SortFunc(fresh, func(a, b model.EngagementEvent) int {
		return cmp.Or(cmp.Compare(a.BroadcastID, b.BroadcastID), cmp.Compare(a.Target, b.Target), cmp.Compare(a.Type, b.Type))
	})
	for rest := fresh; len(rest) > 0; {
		n := min(len(rest), 500)
		batch := rest[:n]
		rest = rest[n:]
		args := make([]any, 0, 8*n)
		for _, e := range batch {
			args = append(args, e.BroadcastID, e.Target, uint8(e.Type), e.UserID, e.Variant, e.Localized, dbTime(e.Sent), dbTime(e.At))
		}
		r, err := tx.ExecContext(ctx, "INSERT IGNORE INTO engagement_events (broadcast_id, target_id, type, user_id, variant, localized, sent_at, at) VALUES "+
			strings.TrimSuffix(strings.Repeat("(?,?,?,?,?,?,?,?),", n), ","), args...)
		if err != nil {
			return fmt.Errorf("events: insert: %w", err)
		}
		if got, _ := r.RowsAffected(); got != int64(n) {
			return fmt.Errorf("events: %d of %d inserted: %w", got, n, sqldb.ErrConflict)
		}
	}
	type countKey struct {
		broadcast          uint64
		variant, localized int
		typ                model.EventType
	}
	type seriesKey struct {
		broadcast uint64
		typ       model.EventType
		minute    int64
	}
	type delayKey struct {
		broadcast uint64
		bucket    int
	}
	type platformKey struct {
		broadcast uint64
		platform  uint8
		typ       model.EventType
	}
	counts, series, delays := map[countKey]int64{}, map[seriesKey]int64{}, map[delayKey]int64{}
	platforms := map[platformKey]int64{}
	for _, e := range fresh {
		counts[countKey{e.BroadcastID, e.Variant, e.Localized, e.Type}]++
		platforms[platformKey{e.BroadcastID, model.PlatformCode(e.Platform), e.Type}]++
		series[seriesKey{e.BroadcastID, e.Type, e.At.Unix() / 60}]++
		if e.Type == model.EventOpened {
			delays[delayKey{e.BroadcastID, DelayBucket(e.At.Sub(e.Sent))}]++
		}
	}
	var args []any
	for _, k := range sortedKeys(counts, func(a, b countKey) int {
		return cmp.Or(cmp.Compare(a.broadcast, b.broadcast), cmp.Compare(a.variant, b.variant), cmp.Compare(a.localized, b.localized), cmp.Compare(a.typ, b.typ))
	}) {
		args = append(args, k.broadcast, k.variant, k.localized, uint8(k.typ), counts[k])
	}
	if err := upsertCounts(ctx, tx, "engagement_counts (broadcast_id, variant, localized, type, n)", 5, args); err != nil {
		return err
	}
	args = args[:0]
	for _, k := range sortedKeys(platforms, func(a, b platformKey) int {
		return cmp.Or(cmp.Compare(a.broadcast, b.broadcast), cmp.Compare(a.platform, b.platform), cmp.Compare(a.typ, b.typ))
	}) {
		args = append(args, k.broadcast, k.platform, uint8(k.typ), platforms[k])
	}
	if err := upsertCounts(ctx, tx, "engagement_platform_counts (broadcast_id, platform, type, n)", 4, args); err != nil {
		return err
	}
	args = args[:0]
	for _, k := range sortedKeys(series, func(a, b seriesKey) int {
		return cmp.Or(cmp.Compare(a.broadcast, b.broadcast), cmp.Compare(a.typ, b.typ), cmp.Compare(a.minute, b.minute))
	}) {
		args = append(args, k.broadcast, uint8(k.typ), time.Unix(k.minute*60, 0).UTC(), series[k])
	}
	if err := upsertCounts(ctx, tx, "engagement_series (broadcast_id, type, minute, n)", 4, args); err != nil {
		return err
	}
	args = args[:0]
	for _, k := range sortedKeys(delays, func(a, b delayKey) int {
		return cmp.Or(cmp.Compare(a.broadcast, b.broadcast), cmp.Compare(a.bucket, b.bucket))
	}) {
		args = append(args, k.broadcast, k.bucket, delays[k])
	}
	return upsertCounts(ctx, tx, "engagement_open_delays (broadcast_id, bucket, n)", 3, args)
}

func sortedKeys[K comparable](m map[K]int64, cmpf func(a, b K) int) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, cmpf)
	return out
}

// upsertCounts adds rows of width columns (the last one n) to table.
func upsertCounts(ctx context.Context, tx *sql.Tx, table string, width int, args []any) error {
	if len(args) == 0 {
		return nil
	}
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", width), ",") + "),"
	q := "INSERT INTO " + table + " VALUES " + strings.TrimSuffix(strings.Repeat(row, len(args)/width), ",") + " ON DUPLICATE KEY UPDATE n = n + VALUES(n)"
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("events: adding to %s: %w", table[:strings.IndexByte(table, ' ')], err)
	}
	return nil
}

// delayGrowth is the width of a time-to-open bucket: each is 10 % wider
// than the one before, so a percentile read from the buckets is within
// 5 % of the true one, over a week of delays in about 130 buckets.
const delayGrowth = 1.1

// DelayBucket is the histogram bucket of a time to open: 0 under a second,
// then b for [1.1^(b-1), 1.1^b) seconds.
func DelayBucket(d time.Duration) int {
	s := d.Seconds()
	if s < 1 {
		return 0
	}
	return min(int(math.Log(s)/math.Log(delayGrowth))+1, math.MaxUint16)
}

// delayOf is a bucket's midpoint (geometric), as the delay it stands for.
func delayOf(b int) time.Duration {
	if b == 0 {
		return 500 * time.Millisecond
	}
	s := math.Pow(delayGrowth, float64(b)-0.5)
	return time.Duration(s * float64(time.Second)).Round(time.Second)
}

// Engagement reads broadcast id's counts, by variant and localized variant,
// and its time-to-open percentiles.
func (s *Store) Engagement(ctx context.Context, id uint64) (model.Engagement, error) {
	en := model.Engagement{ByVariant: map[int]model.EventCounts{}, ByLocalized: map[int]model.EventCounts{}}
	rows, err := s.db.QueryContext(ctx, "SELECT variant, localized, type, n FROM engagement_counts WHERE broadcast_id = ?", id)
	if err != nil {
		return en, fmt.Errorf("engagement of %d: %w", id, err)
	}
	defer rows.Close()
	var total model.EventCounts
	for rows.Next() {
		var variant, localized int
		var typ uint8
		var n int64
		if err := rows.Scan(&variant, &localized, &typ, &n); err != nil {
			return en, fmt.Errorf("engagement of %d: %w", id, err)
		}
		t := model.EventType(typ)
		total.Add(t, n)
		v, l := en.ByVariant[variant], en.ByLocalized[localized]
		v.Add(t, n)
		l.Add(t, n)
		en.ByVariant[variant], en.ByLocalized[localized] = v, l
	}
	if err := rows.Err(); err != nil {
		return en, fmt.Errorf("engagement of %d: %w", id, err)
	}
	en.Received, en.Opened, en.Clicked, en.Dismissed = total.Received, total.Opened, total.Clicked, total.Dismissed
	var hist []struct {
		Bucket int   `db:"bucket"`
		N      int64 `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &hist, "SELECT bucket, n FROM engagement_open_delays WHERE broadcast_id = ? ORDER BY bucket", id); err != nil {
		return en, fmt.Errorf("engagement of %d: time to open: %w", id, err)
	}
	var opens int64
	for _, h := range hist {
		opens += h.N
	}
	var seen int64
	for _, h := range hist {
		seen += h.N
		if en.TimeToOpenP50 == nil && 2*seen >= opens {
			d := delayOf(h.Bucket)
			en.TimeToOpenP50 = &d
		}
		if en.TimeToOpenP90 == nil && 10*seen >= 9*opens {
			d := delayOf(h.Bucket)
			en.TimeToOpenP90 = &d
		}
	}
	return en, nil
}

// EngagementSeries reads broadcast id's events per bucket (a whole number
// of minutes) and type, oldest first.
func (s *Store) EngagementSeries(ctx context.Context, id uint64, bucket time.Duration) ([]model.SeriesPoint, error) {
	mins := max(int64(bucket/time.Minute), 1)
	rows, err := s.db.QueryContext(ctx, `SELECT FLOOR(UNIX_TIMESTAMP(minute) / (60 * ?)) * 60 * ? AS at, type, SUM(n)
		FROM engagement_series WHERE broadcast_id = ? GROUP BY at, type ORDER BY at, type`, mins, mins, id)
	if err != nil {
		return nil, fmt.Errorf("engagement series of %d: %w", id, err)
	}
	defer rows.Close()
	var out []model.SeriesPoint
	for rows.Next() {
		var at int64
		var typ uint8
		var p model.SeriesPoint
		if err := rows.Scan(&at, &typ, &p.N); err != nil {
			return nil, fmt.Errorf("engagement series of %d: %w", id, err)
		}
		p.At, p.Type = time.Unix(at, 0).UTC(), model.EventType(typ)
		out = append(out, p)
	}
	return out, rows.Err()
}

// EventKeys returns the event keys pushfan generated, newest first;
// with generate, it generates one first when there is none (an insert
// guarded by NOT EXISTS under a lock, then a read, so that replicas
// starting together keep one of them).
func (s *Store) EventKeys(ctx context.Context, generate bool) ([]model.EventKey, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	kid := fmt.Sprintf("k%x", b)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	var keys []model.EventKey
	err := sqldb.InTx(ctx, s.db.DB, s.log, "event keys", func(tx *sql.Tx) error {
		keys = keys[:0]
		if generate {
			if _, err := tx.ExecContext(ctx, "INSERT INTO event_keys (kid, secret) SELECT ?, ? FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM event_keys FOR UPDATE)", kid, secret); err != nil {
				return fmt.Errorf("generating: %w", err)
			}
		}
		rows, err := tx.QueryContext(ctx, "SELECT kid, secret FROM event_keys ORDER BY created_at DESC, kid")
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var k model.EventKey
			if err := rows.Scan(&k.ID, &k.Secret); err != nil {
				return fmt.Errorf("reading: %w", err)
			}
			keys = append(keys, k)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("event keys: %w", err)
	}
	return keys, nil
}

// EngagementTotals reads the counts of each broadcast of ids (one query, a
// row per broadcast and type): the broadcast list's open rates.
func (s *Store) EngagementTotals(ctx context.Context, ids []uint64) (map[uint64]model.EventCounts, error) {
	out := make(map[uint64]model.EventCounts, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := s.db.QueryContext(ctx, "SELECT broadcast_id, type, SUM(n) FROM engagement_counts WHERE broadcast_id IN ("+sqldb.InList(len(ids))+") GROUP BY broadcast_id, type", args...)
	if err != nil {
		return nil, fmt.Errorf("engagement totals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uint64
		var typ uint8
		var n int64
		if err := rows.Scan(&id, &typ, &n); err != nil {
			return nil, fmt.Errorf("engagement totals: %w", err)
		}
		c := out[id]
		c.Add(model.EventType(typ), n)
		out[id] = c
	}
	return out, rows.Err()
}

// SendRate reads broadcast id's outcomes per bucket (lease.RateBucket)
// since since, oldest first.
func (s *Store) SendRate(ctx context.Context, id uint64, since time.Time) ([]model.SeriesPoint, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT at, n FROM send_rate WHERE broadcast_id = ? AND at >= ? ORDER BY at", id, dbTime(since))
	if err != nil {
		return nil, fmt.Errorf("send rate of %d: %w", id, err)
	}
	defer rows.Close()
	var out []model.SeriesPoint
	for rows.Next() {
		var p model.SeriesPoint
		if err := rows.Scan(&p.At, &p.N); err != nil {
			return nil, fmt.Errorf("send rate of %d: %w", id, err)
		}
		p.At = p.At.UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}
