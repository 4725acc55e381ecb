package repository

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// Column limits, enforced in Go so strict SQL mode never rejects a row over
// an over-long informational string.
const (
	maxRequestIDRunes = 64
	// MaxCreatedByRunes is created_by's and released_by's width.
	MaxCreatedByRunes = 64
	// MaxActorIDRunes is created_by_id's and released_by_id's width.
	MaxActorIDRunes = 255
	maxCodeRunes    = 64
)

// InsertBroadcast inserts b's row inside tx, with the status and counters
// b holds, and sets b.ID and b.CreatedAt (taken from the database clock,
// so all created_at values share one clock). Which status a broadcast is
// stored with is package lease's (Submit, Create), which calls it: the
// row alone, without its per-code counts. With b.IdempotencyKey set and
// already used, it returns ErrDuplicateKey.
func InsertBroadcast(ctx context.Context, tx *sql.Tx, b *model.Broadcast) error {
	if !b.Status.Valid() {
		return fmt.Errorf("insert broadcast: invalid status %q", b.Status)
	}
	if b.Audience.All && len(b.Audience.UserIDs) > 0 {
		return fmt.Errorf("insert broadcast: %w", errAmbiguousAudience) // fail now, not when sending
	}
	msg, err := json.Marshal(b.Message)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	aud, err := json.Marshal(b.Audience)
	if err != nil {
		return fmt.Errorf("encode audience: %w", err)
	}
	var category, rules any // NULL: no category
	if b.Category != nil {
		raw, err := json.Marshal(b.Category)
		if err != nil {
			return fmt.Errorf("encode category: %w", err)
		}
		category, rules = b.Category.Name, string(raw)
	}
	b.Trigger = triggerOrAPI(b.Trigger)
	res, err := tx.ExecContext(ctx, `INSERT INTO broadcasts
		(status, dry_run, invalidate_on_dry_run, message, audience, request_id, created_by,
		 targeted, succeeded, failed, canceled, invalidated_tokens, error, started_at, finished_at,
		 max_token_id, idempotency_key, request_hash, send_at, trigger_kind, job_name, fire_time, submit_token,
		 class, max_rate, deliver_over_ms, parent_id, hold_expires_at, starts_at, deferred, zone_fallbacks, planning, frequency_cap, capped, app,
		 category, category_rules, excluded_no_consent, night_deferred, created_by_kind, created_by_id, users_targeted)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		string(b.Status), b.DryRun, b.InvalidateOnDryRun, string(msg), string(aud),
		sqldb.ClampRunes(b.RequestID, maxRequestIDRunes), nullIfEmpty(sqldb.ClampRunes(b.CreatedBy, MaxCreatedByRunes)),
		b.Targeted, b.Succeeded, b.Failed, b.Canceled, b.Invalidated,
		nullIfEmpty(sqldb.ClampBytes(b.Error, sqldb.MaxTextBytes)), timeArg(b.StartedAt), timeArg(b.FinishedAt),
		b.MaxTokenID, nullIfEmpty(b.IdempotencyKey), nullIfEmpty(b.RequestHash),
		timeArg(b.SendAt), b.Trigger, nullIfEmpty(b.JobName), timeArg(b.FireTime), nullIfEmpty(b.SubmitToken),
		classOrBulk(b.Class), nullIfZero(b.MaxRate), nullIfZero(b.DeliverOver.Milliseconds()),
		nullIfZero(b.ParentID), timeArg(b.HoldExpiresAt), timeArg(b.StartsAt), b.Deferred, b.ZoneFallbacks, b.Status == model.StatusPlanning,
		nullIfEmpty(b.FrequencyCap), b.Capped, appOrDefault(b.App),
		category, rules, b.ExcludedNoConsent, b.NightDeferred,
		nullIfEmpty(string(b.Creator.Kind)), nullIfEmpty(sqldb.ClampRunes(b.Creator.ID, MaxActorIDRunes)), b.UsersTargeted)
	if err != nil {
		if sqldb.IsDuplicateEntry(err) && strings.Contains(err.Error(), "uq_broadcasts_idempotency") {
			return ErrDuplicateKey
		}
		return fmt.Errorf("insert: %w", err)
	}
	last, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("insert id: %w", err)
	}
	var createdAt time.Time
	if err := tx.QueryRowContext(ctx, "SELECT created_at FROM broadcasts WHERE id = ?", last).Scan(&createdAt); err != nil {
		return fmt.Errorf("read created_at: %w", err)
	}
	b.ID, b.CreatedAt = uint64(last), createdAt.UTC()
	return nil
}

// GetBroadcast returns the broadcast with its per-code error and variant
// counts. It reads the row and the counts in one statement, hence from one
// snapshot: while a broadcast runs, Errors always sums to what Failed says.
func (s *Store) GetBroadcast(ctx context.Context, id uint64) (*model.Broadcast, error) {
	return GetBroadcastIn(ctx, s.db, id)
}

// GetBroadcastIn is GetBroadcast through q: a transaction's reads see its
// own writes (an event written beside a transition carries the row as the
// transition left it).
func GetBroadcastIn(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id uint64) (*model.Broadcast, error) {
	var errorsJSON, variantsJSON sql.NullString
	b, err := scanBroadcast(q.QueryRowContext(ctx, selectOneBroadcast+" WHERE id = ?", id), &errorsJSON, &variantsJSON)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get broadcast %d: %w", id, err)
	}
	for _, c := range []struct {
		raw sql.NullString
		dst *map[string]int64
	}{{errorsJSON, &b.Errors}, {variantsJSON, &b.Variants}} {
		if c.raw.Valid {
			if *c.dst == nil {
				*c.dst = map[string]int64{}
			}
			if err := json.Unmarshal([]byte(c.raw.String), c.dst); err != nil {
				return nil, fmt.Errorf("broadcast %d: decode counts: %w", id, err)
			}
		}
	}
	return b, nil
}

// broadcastColumns are a broadcast row's columns, in scanBroadcast's
// order. Every figure is a column of the row itself: lists of broadcasts
// cost one statement for the rows and one each for their error and
// variant counts (readBroadcasts), never a subquery per row.
const broadcastColumns = `id, status, dry_run, invalidate_on_dry_run, message, audience,
		request_id, created_by, targeted, succeeded, failed, canceled, invalidated_tokens, writeback_failures,
		error, created_at, started_at, finished_at,
		max_token_id, cancel_requested, idempotency_key, request_hash,
		send_at, trigger_kind, job_name, fire_time, chunk_summary, submit_token,
		class, COALESCE(max_rate, 0), COALESCE(deliver_over_ms, 0),
		COALESCE(parent_id, 0), released_by, released_at, hold_expires_at, starts_at,
		deferred, zone_fallbacks, waiting, planning, planned_at, capped, COALESCE(frequency_cap, ''), app, held_counted,
		category_rules, excluded_no_consent, night_deferred,
		created_by_kind, created_by_id, released_by_kind, released_by_id, canceled_by, users_targeted, users_count_error`

// selectBroadcast reads broadcast rows; selectOneBroadcast one row with
// its error and variant counts as JSON objects, for a single read.
const (
	selectBroadcast    = "SELECT " + broadcastColumns + " FROM broadcasts b"
	selectOneBroadcast = "SELECT " + broadcastColumns + `,
		(SELECT JSON_OBJECTAGG(e.code, e.count) FROM broadcast_errors e WHERE e.broadcast_id = b.id),
		(SELECT JSON_OBJECTAGG(v.variant, v.targets) FROM broadcast_variants v WHERE v.broadcast_id = b.id)
	FROM broadcasts b`
)

// readBroadcasts runs selectBroadcast with the rest of a query (where,
// order, limit) and adds each row's error and variant counts. It reads in
// one read-only transaction, hence from one snapshot: while a broadcast
// runs, its Errors always sum to what Failed says, and its Variants to
// Succeeded + Failed.
func (s *Store) readBroadcasts(ctx context.Context, rest string, args ...any) ([]*model.Broadcast, error) {
	// The server's default isolation, REPEATABLE READ, gives the
	// transaction one snapshot from its first read.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, selectBroadcast+rest, args...)
	if err != nil {
		return nil, err
	}
	var out []*model.Broadcast
	byID := map[uint64]*model.Broadcast{}
	for rows.Next() {
		b, err := scanBroadcast(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, b)
		byID[b.ID] = b
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return out, nil
	}
	in := make([]string, len(out))
	for i, b := range out {
		in[i] = strconv.FormatUint(b.ID, 10)
	}
	list := strings.Join(in, ",")
	if err := readCounts(ctx, tx, "SELECT broadcast_id, code, count FROM broadcast_errors WHERE broadcast_id IN ("+list+")", func(id uint64, k string, n int64) {
		if b := byID[id]; b != nil {
			b.Errors[k] = n
		}
	}); err != nil {
		return nil, fmt.Errorf("error counts: %w", err)
	}
	if err := readCounts(ctx, tx, "SELECT broadcast_id, variant, targets FROM broadcast_variants WHERE broadcast_id IN ("+list+")", func(id uint64, k string, n int64) {
		if b := byID[id]; b != nil {
			if b.Variants == nil {
				b.Variants = map[string]int64{}
			}
			b.Variants[k] = n
		}
	}); err != nil {
		return nil, fmt.Errorf("variant counts: %w", err)
	}
	return out, nil
}

// readCounts runs a query of (broadcast id, key, count) rows.
func readCounts(ctx context.Context, tx *sql.Tx, q string, add func(id uint64, key string, n int64)) error {
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id uint64
		var k string
		var n int64
		if err := rows.Scan(&id, &k, &n); err != nil {
			return err
		}
		add(id, k, n)
	}
	return rows.Err()
}

// scanBroadcast decodes a row of broadcastColumns, then any extra
// columns into extra.
func scanBroadcast(row interface{ Scan(...any) error }, extra ...any) (*model.Broadcast, error) {
	var (
		b                         model.Broadcast
		status, msg, aud          string
		createdBy, errText        sql.NullString
		idemKey, reqHash, jobName sql.NullString
		summary, submitToken      sql.NullString
		deliverMS                 int64
		startedAt, finishedAt     sql.NullTime
		sendAt, fireTime          sql.NullTime
		releasedBy, canceledBy    sql.NullString
		releasedAt, holdExpiresAt sql.NullTime
		startsAt, plannedAt       sql.NullTime
		categoryRules             sql.NullString
		creatorKind, creatorID    sql.NullString
		releaserKind, releaserID  sql.NullString
		usersTargeted             sql.NullInt64
		usersCountError           sql.NullString
	)
	if err := row.Scan(append([]any{
		&b.ID, &status, &b.DryRun, &b.InvalidateOnDryRun, &msg, &aud,
		&b.RequestID, &createdBy, &b.Targeted, &b.Succeeded, &b.Failed, &b.Canceled, &b.Invalidated, &b.WriteBackFailures,
		&errText, &b.CreatedAt, &startedAt, &finishedAt,
		&b.MaxTokenID, &b.CancelRequested, &idemKey, &reqHash,
		&sendAt, &b.Trigger, &jobName, &fireTime, &summary, &submitToken,
		&b.Class, &b.MaxRate, &deliverMS,
		&b.ParentID, &releasedBy, &releasedAt, &holdExpiresAt, &startsAt,
		&b.Deferred, &b.ZoneFallbacks, &b.Waiting, &b.Planning, &plannedAt, &b.Capped, &b.FrequencyCap, &b.App, &b.HeldCounted,
		&categoryRules, &b.ExcludedNoConsent, &b.NightDeferred,
		&creatorKind, &creatorID, &releaserKind, &releaserID, &canceledBy, &usersTargeted, &usersCountError}, extra...)...); err != nil {
		return nil, err
	}
	b.Status = model.Status(status)
	b.CreatedBy = createdBy.String
	b.Error = errText.String
	b.IdempotencyKey = idemKey.String
	b.RequestHash = reqHash.String
	b.SubmitToken = submitToken.String
	b.DeliverOver = time.Duration(deliverMS) * time.Millisecond
	b.JobName = jobName.String
	b.SendAt = nullTime(sendAt)
	b.FireTime = nullTime(fireTime)
	b.ReleasedBy = releasedBy.String
	b.CanceledBy = canceledBy.String
	if creatorKind.Valid {
		b.Creator = model.Actor{Kind: model.ActorKind(creatorKind.String), ID: creatorID.String, Name: b.CreatedBy}
	}
	if releaserKind.Valid {
		b.Releaser = model.Actor{Kind: model.ActorKind(releaserKind.String), ID: releaserID.String, Name: b.ReleasedBy}
	}
	b.ReleasedAt = nullTime(releasedAt)
	b.HoldExpiresAt = nullTime(holdExpiresAt)
	b.StartsAt = nullTime(startsAt)
	b.PlannedAt = nullTime(plannedAt)
	if usersTargeted.Valid {
		b.UsersTargeted = &usersTargeted.Int64
	}
	b.UsersCountError = usersCountError.String
	b.CreatedAt = b.CreatedAt.UTC()
	b.StartedAt = nullTime(startedAt)
	b.FinishedAt = nullTime(finishedAt)
	if err := json.Unmarshal([]byte(msg), &b.Message); err != nil {
		return nil, fmt.Errorf("broadcast %d: decode message: %w", b.ID, err)
	}
	if err := json.Unmarshal([]byte(aud), &b.Audience); err != nil {
		return nil, fmt.Errorf("broadcast %d: decode audience: %w", b.ID, err)
	}
	if categoryRules.Valid {
		b.Category = &model.Category{}
		if err := json.Unmarshal([]byte(categoryRules.String), b.Category); err != nil {
			return nil, fmt.Errorf("broadcast %d: decode category: %w", b.ID, err)
		}
	}
	if summary.Valid {
		b.Chunks = &model.ChunkSummary{}
		if err := json.Unmarshal([]byte(summary.String), b.Chunks); err != nil {
			return nil, fmt.Errorf("broadcast %d: decode chunk summary: %w", b.ID, err)
		}
	}
	b.Errors = map[string]int64{} // never nil: the API renders {} rather than null
	if len(b.Message.Localized) > 0 {
		b.Variants = map[string]int64{} // a localized broadcast has a map even before its first checkpoint
	}
	return &b, nil
}

// ListBroadcasts returns broadcasts newest first by keyset on id.
func (s *Store) ListBroadcasts(ctx context.Context, f model.ListFilter) ([]*model.Broadcast, error) {
	if f.Limit <= 0 {
		return nil, fmt.Errorf("list broadcasts: limit %d must be positive", f.Limit)
	}
	var where []string
	var args []any
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, string(f.Status))
	}
	if f.Apps != nil {
		if len(f.Apps) == 0 {
			return nil, nil
		}
		where = append(where, "app IN ("+sqldb.InList(len(f.Apps))+")")
		for _, a := range f.Apps {
			args = append(args, a)
		}
	}
	if f.Trigger != "" {
		where = append(where, "trigger_kind = ?")
		args = append(args, f.Trigger)
	}
	if f.Before > 0 {
		where = append(where, "id < ?")
		args = append(args, f.Before)
	}
	q := ""
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, f.Limit)
	out, err := s.readBroadcasts(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list broadcasts: %w", err)
	}
	return out, nil
}

// ErrDuplicateKey: a broadcast with this idempotency key exists.
var ErrDuplicateKey = errors.New("idempotency key already used")

// FindByIdempotencyKey returns the broadcast submitted with key.
func (s *Store) FindByIdempotencyKey(ctx context.Context, key string) (*model.Broadcast, error) {
	return s.findBy(ctx, "idempotency_key", key)
}

// FindBySubmitToken returns the broadcast stored with token, if that
// submit committed. The locking read waits for a commit still in progress
// on the server, so "not found" means it did not happen.
func (s *Store) FindBySubmitToken(ctx context.Context, token string) (*model.Broadcast, error) {
	var id uint64
	err := sqldb.InTx(ctx, s.db.DB, s.log, "find submit", func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT id FROM broadcasts WHERE submit_token = ? FOR UPDATE", token).Scan(&id)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("submit token: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("find submit token: %w", err)
	}
	return s.GetBroadcast(ctx, id)
}

func (s *Store) findBy(ctx context.Context, column, value string) (*model.Broadcast, error) {
	var id uint64
	err := s.db.QueryRowContext(ctx, "SELECT id FROM broadcasts WHERE "+column+" = ?", value).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", column, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("find by %s: %w", column, err)
	}
	return s.GetBroadcast(ctx, id)
}

func appOrDefault(app string) string {
	if app == "" {
		return model.DefaultApp
	}
	return app
}

func classOrBulk(class string) string {
	if class == "" {
		return model.ClassBulk
	}
	return class
}
