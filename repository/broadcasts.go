package repository

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"pushfan/internal/sqldb"
	"pushfan/lease"
)

// Status is a broadcast's lifecycle state.
type Status string

// Broadcast states. queued → running → one of the three final states; a
// queued broadcast may also go straight to a final state (canceled, failed).
const (
	StatusScheduled Status = "scheduled" // waiting for send_at
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusCanceled  Status = "canceled"
	StatusFailed    Status = "failed"
)

// Valid reports whether s is one of the five known states.
func (s Status) Valid() bool {
	switch s {
	case StatusScheduled, StatusQueued, StatusRunning, StatusCompleted, StatusCanceled, StatusFailed:
		return true
	}
	return false
}

// Final reports whether s is a state a broadcast never leaves.
func (s Status) Final() bool {
	return s == StatusCompleted || s == StatusCanceled || s == StatusFailed
}

// Column limits, enforced in Go so strict SQL mode never rejects a row over
// an over-long informational string.
const (
	maxRequestIDRunes = 64
	maxCreatedByRunes = 64
	maxCodeRunes      = 64
	maxErrorBytes     = 65535 // TEXT
)

// Message is the notification content, stored as JSON.
type Message struct {
	Title string            `json:"title,omitempty"`
	Body  string            `json:"body,omitempty"`
	Image string            `json:"image,omitempty"`
	Data  map[string]string `json:"data,omitempty"`
}

// Counts are a broadcast's outcome counters; Errors maps an error code to
// how many targets ended with it. Chunk checkpoints add to them.
type Counts struct {
	Targeted, Succeeded, Failed, Canceled, Invalidated int64
	Errors                                             map[string]int64
}

// Broadcast is one request to notify an audience, and its running result.
type Broadcast struct {
	ID                 uint64
	Status             Status
	DryRun             bool
	InvalidateOnDryRun bool
	Message            Message
	Audience           Audience
	RequestID          string
	CreatedBy          string
	Counts
	Error      string // "" when none
	CreatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time

	// Durable-run fields (see submit.go and package lease).
	MaxTokenID      uint64 // audience snapshot: tokens above it were registered later
	CancelRequested bool
	IdempotencyKey  string
	RequestHash     string
	// SubmitToken names the submit attempt, to find it again after a lost
	// commit answer.
	SubmitToken string
	// Chunks summarises the chunk rows, kept when the broadcast finished.
	Chunks *lease.Summary

	// Scheduling (see schedule.go).
	SendAt   *time.Time // a one-off broadcast waits for it in status scheduled
	Trigger  string     // api, schedule or cron
	JobName  string     // cron jobs only
	FireTime *time.Time // cron jobs only
}

// CreateBroadcast inserts b with status queued (or b.Status if set) and sets
// b.ID and b.CreatedAt (taken from the database clock, so all created_at
// values share one clock). Counters, error and times already set on b are
// stored too, which lets tools import finished broadcasts.
func (s *Store) CreateBroadcast(ctx context.Context, b *Broadcast) error {
	if b.Status == "" {
		b.Status = StatusQueued
	}
	if !b.Status.Valid() {
		return fmt.Errorf("create broadcast: invalid status %q", b.Status)
	}
	if b.Audience.All && len(b.Audience.UserIDs) > 0 {
		return fmt.Errorf("create broadcast: %w", errAmbiguousAudience) // fail now, not when sending
	}
	msg, aud, err := encodeContent(b)
	if err != nil {
		return fmt.Errorf("create broadcast: %w", err)
	}
	var (
		id        uint64
		createdAt time.Time
	)
	err = sqldb.InTx(ctx, s.db.DB, s.log, "create broadcast", func(tx *sql.Tx) error {
		id, createdAt, err = insertBroadcast(ctx, tx, b, string(msg), string(aud))
		return err
	})
	if err != nil {
		return err
	}
	b.ID = id
	b.CreatedAt = createdAt.UTC()
	return nil
}

// encodeContent returns b's message and audience as the JSON stored.
func encodeContent(b *Broadcast) (msg, aud []byte, err error) {
	if msg, err = json.Marshal(b.Message); err != nil {
		return nil, nil, fmt.Errorf("encode message: %w", err)
	}
	if aud, err = json.Marshal(b.Audience); err != nil {
		return nil, nil, fmt.Errorf("encode audience: %w", err)
	}
	return msg, aud, nil
}

// insertBroadcast inserts b inside tx and returns its id and creation time.
func insertBroadcast(ctx context.Context, tx *sql.Tx, b *Broadcast, msg, aud string) (uint64, time.Time, error) {
	var createdAt time.Time
	b.Trigger = triggerOrAPI(b.Trigger)
	res, err := tx.ExecContext(ctx, `INSERT INTO broadcasts
		(status, dry_run, invalidate_on_dry_run, message, audience, request_id, created_by,
		 targeted, succeeded, failed, canceled, invalidated_tokens, error, started_at, finished_at,
		 max_token_id, idempotency_key, request_hash, send_at, trigger_kind, job_name, fire_time, submit_token)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		string(b.Status), b.DryRun, b.InvalidateOnDryRun, msg, aud,
		clampText(b.RequestID, maxRequestIDRunes), nullIfEmpty(clampText(b.CreatedBy, maxCreatedByRunes)),
		b.Targeted, b.Succeeded, b.Failed, b.Canceled, b.Invalidated,
		nullIfEmpty(clampBytes(b.Error, maxErrorBytes)), timeArg(b.StartedAt), timeArg(b.FinishedAt),
		b.MaxTokenID, nullIfEmpty(b.IdempotencyKey), nullIfEmpty(b.RequestHash),
		timeArg(b.SendAt), b.Trigger, nullIfEmpty(b.JobName), timeArg(b.FireTime), nullIfEmpty(b.SubmitToken))
	if err != nil {
		return 0, createdAt, fmt.Errorf("insert: %w", err)
	}
	last, err := res.LastInsertId()
	if err != nil {
		return 0, createdAt, fmt.Errorf("insert id: %w", err)
	}
	id := uint64(last)
	if err := lease.AddErrorCounts(ctx, tx, id, b.Errors); err != nil {
		return 0, createdAt, err
	}
	if err := tx.QueryRowContext(ctx, "SELECT created_at FROM broadcasts WHERE id = ?", id).Scan(&createdAt); err != nil {
		return 0, createdAt, fmt.Errorf("read created_at: %w", err)
	}
	return id, createdAt, nil
}

// GetBroadcast returns the broadcast with its per-code error counts. It reads
// the row and the counts in one statement, hence from one snapshot: while a
// broadcast runs, Errors always sums to what Failed says.
func (s *Store) GetBroadcast(ctx context.Context, id uint64) (*Broadcast, error) {
	b, err := scanBroadcast(s.db.QueryRowContext(ctx, selectBroadcast+" WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get broadcast %d: %w", id, err)
	}
	return b, nil
}

// selectBroadcast reads a broadcast row with its error map in one statement,
// so the errors always add up to failed; scanBroadcast decodes it.
const selectBroadcast = `SELECT id, status, dry_run, invalidate_on_dry_run, message, audience,
		request_id, created_by, targeted, succeeded, failed, canceled, invalidated_tokens,
		error, created_at, started_at, finished_at,
		(SELECT JSON_OBJECTAGG(e.code, e.count) FROM broadcast_errors e WHERE e.broadcast_id = b.id),
		max_token_id, cancel_requested, idempotency_key, request_hash,
		send_at, trigger_kind, job_name, fire_time, chunk_summary
	FROM broadcasts b`

func scanBroadcast(row interface{ Scan(...any) error }) (*Broadcast, error) {
	var (
		b                              Broadcast
		status, msg, aud               string
		createdBy, errText, errorsJSON sql.NullString
		idemKey, reqHash, jobName      sql.NullString
		summary                        sql.NullString
		startedAt, finishedAt          sql.NullTime
		sendAt, fireTime               sql.NullTime
	)
	if err := row.Scan(
		&b.ID, &status, &b.DryRun, &b.InvalidateOnDryRun, &msg, &aud,
		&b.RequestID, &createdBy, &b.Targeted, &b.Succeeded, &b.Failed, &b.Canceled, &b.Invalidated,
		&errText, &b.CreatedAt, &startedAt, &finishedAt, &errorsJSON,
		&b.MaxTokenID, &b.CancelRequested, &idemKey, &reqHash,
		&sendAt, &b.Trigger, &jobName, &fireTime, &summary); err != nil {
		return nil, err
	}
	b.Status = Status(status)
	b.CreatedBy = createdBy.String
	b.Error = errText.String
	b.IdempotencyKey = idemKey.String
	b.RequestHash = reqHash.String
	b.JobName = jobName.String
	b.SendAt = nullTime(sendAt)
	b.FireTime = nullTime(fireTime)
	b.CreatedAt = b.CreatedAt.UTC()
	b.StartedAt = nullTime(startedAt)
	b.FinishedAt = nullTime(finishedAt)
	if err := json.Unmarshal([]byte(msg), &b.Message); err != nil {
		return nil, fmt.Errorf("broadcast %d: decode message: %w", b.ID, err)
	}
	if err := json.Unmarshal([]byte(aud), &b.Audience); err != nil {
		return nil, fmt.Errorf("broadcast %d: decode audience: %w", b.ID, err)
	}
	if summary.Valid {
		b.Chunks = &lease.Summary{}
		if err := json.Unmarshal([]byte(summary.String), b.Chunks); err != nil {
			return nil, fmt.Errorf("broadcast %d: decode chunk summary: %w", b.ID, err)
		}
	}
	b.Errors = map[string]int64{} // never nil: the API renders {} rather than null
	if errorsJSON.Valid {
		if err := json.Unmarshal([]byte(errorsJSON.String), &b.Errors); err != nil {
			return nil, fmt.Errorf("broadcast %d: decode error counts: %w", b.ID, err)
		}
	}
	return &b, nil
}
