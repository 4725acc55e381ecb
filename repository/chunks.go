package repository

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Chunk is one keyset range (LoID, HiID] of a broadcast's audience, claimed
// by one instance at a time under a lease.
type Chunk struct {
	BroadcastID uint64
	Seq         int
	LoID, HiID  uint64
	Cursor      uint64 // every target at or below it has its outcome stored
	Takeover    bool   // claimed from an instance whose lease expired
}

// Chunk statuses.
const (
	ChunkPending = "pending"
	ChunkLeased  = "leased"
	ChunkDone    = "done"
)

var (
	// ErrLeaseLost: the chunk's lease expired and another instance took it;
	// the caller must stop and store nothing more for it.
	ErrLeaseLost = errors.New("chunk lease lost")
	// ErrDuplicateKey: a broadcast with this idempotency key exists.
	ErrDuplicateKey = errors.New("idempotency key already used")
)

// SubmitBroadcast stores b as queued together with its chunks, in one
// transaction, so no broadcast ever exists without the work that completes
// it. The audience is snapshotted at the highest token id now
// (b.MaxTokenID): tokens registered later are not part of it. Chunks are
// ranges of chunkWidth token ids (widened so there are at most maxChunks).
// With b.IdempotencyKey set and already used, it returns ErrDuplicateKey.
func (s *Store) SubmitBroadcast(ctx context.Context, b *Broadcast, chunkWidth uint64, maxChunks int) error {
	if b.Audience.All && len(b.Audience.UserIDs) > 0 {
		return fmt.Errorf("submit broadcast: %w", errAmbiguousAudience)
	}
	if chunkWidth == 0 || maxChunks <= 0 {
		return fmt.Errorf("submit broadcast: chunk width %d and max chunks %d must be positive", chunkWidth, maxChunks)
	}
	msg, err := json.Marshal(b.Message)
	if err != nil {
		return fmt.Errorf("submit broadcast: encode message: %w", err)
	}
	aud, err := json.Marshal(b.Audience)
	if err != nil {
		return fmt.Errorf("submit broadcast: encode audience: %w", err)
	}
	b.Status = StatusQueued
	if b.SendAt != nil {
		b.Status = StatusScheduled // chunks are made when it is due (PromoteDue)
	}
	err = s.inTx(ctx, "submit broadcast", func(tx *sql.Tx) error {
		if b.Status == StatusQueued {
			if err := snapshotAudience(ctx, tx, b); err != nil {
				return err
			}
		}
		id, createdAt, err := insertBroadcast(ctx, tx, b, string(msg), string(aud))
		if err != nil {
			if isDuplicateEntry(err) {
				return ErrDuplicateKey
			}
			return err
		}
		b.ID, b.CreatedAt = id, createdAt.UTC()
		if b.Status == StatusQueued {
			return insertChunks(ctx, tx, b, chunkWidth, maxChunks)
		}
		return nil
	})
	if errors.Is(err, ErrDuplicateKey) {
		return fmt.Errorf("submit broadcast: %w", ErrDuplicateKey)
	}
	return err
}

// snapshotAudience records the highest device token id now in b.MaxTokenID:
// tokens registered later are not part of the broadcast.
func snapshotAudience(ctx context.Context, tx *sql.Tx, b *Broadcast) error {
	var hi sql.NullInt64
	if err := tx.QueryRowContext(ctx, "SELECT MAX(id) FROM device_tokens").Scan(&hi); err != nil {
		return fmt.Errorf("audience bounds: %w", err)
	}
	b.MaxTokenID = uint64(hi.Int64)
	return nil
}

// insertChunks splits (MIN(id)-1, b.MaxTokenID] into chunks of chunkWidth
// ids (wider if that would make more than maxChunks). A named audience pages
// by its own cursor column, whose range is unknown: it gets one chunk.
func insertChunks(ctx context.Context, tx *sql.Tx, b *Broadcast, chunkWidth uint64, maxChunks int) error {
	if b.Audience.Name != "" {
		if _, err := tx.ExecContext(ctx, "INSERT INTO broadcast_chunks (broadcast_id, seq, lo_id, hi_id, cursor_id) VALUES (?, 0, 0, ?, 0)",
			b.ID, uint64(math.MaxUint64)); err != nil {
			return fmt.Errorf("insert chunk: %w", err)
		}
		return nil
	}
	var lo sql.NullInt64
	if err := tx.QueryRowContext(ctx, "SELECT MIN(id) FROM device_tokens WHERE id <= ?", b.MaxTokenID).Scan(&lo); err != nil {
		return fmt.Errorf("audience bounds: %w", err)
	}
	if !lo.Valid || b.MaxTokenID == 0 {
		return nil // no tokens at all: no chunks; the broadcast completes empty
	}
	start := uint64(lo.Int64) - 1
	span := b.MaxTokenID - start
	width := max(chunkWidth, (span+uint64(maxChunks)-1)/uint64(maxChunks))
	var rows []string
	var args []any
	for seq, from := 0, start; from < b.MaxTokenID; seq, from = seq+1, from+width {
		to := min(from+width, b.MaxTokenID)
		rows = append(rows, "(?, ?, ?, ?, ?)")
		args = append(args, b.ID, seq, from, to, from)
	}
	for len(rows) > 0 {
		n := min(len(rows), 1000)
		if _, err := tx.ExecContext(ctx, "INSERT INTO broadcast_chunks (broadcast_id, seq, lo_id, hi_id, cursor_id) VALUES "+
			strings.Join(rows[:n], ","), args[:5*n]...); err != nil {
			return fmt.Errorf("insert chunks: %w", err)
		}
		rows, args = rows[n:], args[5*n:]
	}
	return nil
}

// FindByIdempotencyKey returns the broadcast submitted with key.
func (s *Store) FindByIdempotencyKey(ctx context.Context, key string) (*Broadcast, error) {
	var id uint64
	err := s.db.QueryRowContext(ctx, "SELECT id FROM broadcasts WHERE idempotency_key = ?", key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("idempotency key: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("find idempotency key: %w", err)
	}
	return s.GetBroadcast(ctx, id)
}

// ClaimChunk leases the first pending chunk, or one whose lease expired
// (its holder died), to owner for lease. SKIP LOCKED lets instances claim
// concurrently without waiting on each other. It returns nil when there is
// nothing to do. Lease times use the database clock, so instances' clocks
// need not agree.
func (s *Store) ClaimChunk(ctx context.Context, owner string, lease time.Duration) (*Chunk, error) {
	var c *Chunk
	err := s.inTx(ctx, "claim chunk", func(tx *sql.Tx) error {
		c = nil
		var ch Chunk
		var status string
		err := tx.QueryRowContext(ctx, `SELECT broadcast_id, seq, lo_id, hi_id, cursor_id, status
			FROM broadcast_chunks
			WHERE status = 'pending' OR (status = 'leased' AND lease_until < UTC_TIMESTAMP(6) AND lease_owner <> ?)
			ORDER BY broadcast_id, seq LIMIT 1 FOR UPDATE SKIP LOCKED`, owner).
			Scan(&ch.BroadcastID, &ch.Seq, &ch.LoID, &ch.HiID, &ch.Cursor, &status)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("select: %w", err)
		}
		ch.Takeover = status == ChunkLeased
		// takeovers is assigned before status: MySQL evaluates SET left to right.
		if _, err := tx.ExecContext(ctx, `UPDATE broadcast_chunks SET
				takeovers = takeovers + IF(status = 'leased', 1, 0), claims = claims + 1,
				status = 'leased', lease_owner = ?, lease_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
			WHERE broadcast_id = ? AND seq = ?`, owner, lease.Microseconds(), ch.BroadcastID, ch.Seq); err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET status = 'running', started_at = COALESCE(started_at, UTC_TIMESTAMP(6))
			WHERE id = ? AND status = 'queued'`, ch.BroadcastID); err != nil {
			return fmt.Errorf("start broadcast: %w", err)
		}
		c = &ch
		return nil
	})
	return c, err
}

// ChunkEnd says what a checkpoint does with the lease.
type ChunkEnd int

const (
	// KeepLease renews the lease: the run goes on.
	KeepLease ChunkEnd = iota
	// DoneChunk closes the chunk: every target has an outcome.
	DoneChunk
	// ReleaseChunk hands the chunk back (shutdown): another instance
	// resumes it from Cursor at once instead of waiting for the lease.
	ReleaseChunk
)

// Checkpoint is one chunk's progress since its previous checkpoint: the
// outcomes of the targets in (previous cursor, Cursor].
type Checkpoint struct {
	// From is the chunk's cursor when this checkpoint's outcomes began; a
	// retry of a checkpoint whose commit was in doubt is recognised by the
	// stored cursor already being Cursor, and not counted twice.
	From                        uint64
	Cursor                      uint64
	Succeeded, Failed, Canceled int64
	Errors                      map[string]int64
	Failures                    []Failure
	Dead                        []Invalidation
	End                         ChunkEnd
	Lease                       time.Duration
}

// CheckpointResult reports what the checkpoint learned.
type CheckpointResult struct {
	CancelRequested bool  // the broadcast was canceled (or failed): stop
	Invalidated     int64 // tokens this checkpoint invalidated
}

// Checkpoint stores a chunk's progress in one transaction: the cursor, the
// failures, the dead tokens, and the counters added to the broadcast. The
// chunk row is locked first and must still be leased by owner; otherwise
// nothing is written and ErrLeaseLost is returned, so a takeover never
// double-counts.
func (s *Store) Checkpoint(ctx context.Context, c *Chunk, owner string, cp Checkpoint) (CheckpointResult, error) {
	var res CheckpointResult
	err := s.inTx(ctx, "checkpoint chunk", func(tx *sql.Tx) error {
		res = CheckpointResult{}
		var holder sql.NullString
		var status string
		var stored uint64
		if err := tx.QueryRowContext(ctx, "SELECT lease_owner, status, cursor_id FROM broadcast_chunks WHERE broadcast_id = ? AND seq = ? FOR UPDATE",
			c.BroadcastID, c.Seq).Scan(&holder, &status, &stored); err != nil {
			return fmt.Errorf("lock chunk: %w", err)
		}
		if status != ChunkLeased || holder.String != owner {
			return ErrLeaseLost
		}
		if stored != cp.From {
			if stored != cp.Cursor {
				return fmt.Errorf("chunk cursor is %d, checkpoint expected %d: %w", stored, cp.From, ErrLeaseLost)
			}
			// The previous attempt committed (its answer was lost): keep
			// the lease change, add nothing twice.
			cp.Succeeded, cp.Failed, cp.Canceled, cp.Errors, cp.Failures, cp.Dead = 0, 0, 0, nil, nil, nil
		}
		committed := cp.Succeeded + cp.Failed + cp.Canceled
		var q string
		args := []any{cp.Cursor, committed}
		switch cp.End {
		case KeepLease:
			q = "lease_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND"
			args = append(args, cp.Lease.Microseconds())
		case DoneChunk:
			q = "status = 'done', done_by = ?, lease_owner = NULL, lease_until = NULL"
			args = append(args, owner)
		case ReleaseChunk:
			q = "status = 'pending', lease_owner = NULL, lease_until = NULL"
		}
		args = append(args, c.BroadcastID, c.Seq)
		if _, err := tx.ExecContext(ctx, "UPDATE broadcast_chunks SET cursor_id = ?, committed = committed + ?, "+q+
			" WHERE broadcast_id = ? AND seq = ?", args...); err != nil {
			return fmt.Errorf("update chunk: %w", err)
		}
		if len(cp.Failures) > 0 {
			if err := insertFailures(ctx, tx, cp.Failures); err != nil {
				return err
			}
		}
		n, err := invalidateTokens(ctx, tx, cp.Dead, time.Now())
		if err != nil {
			return err
		}
		res.Invalidated = n
		if committed > 0 || n > 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET succeeded = succeeded + ?, failed = failed + ?,
				canceled = canceled + ?, invalidated_tokens = invalidated_tokens + ? WHERE id = ?`,
				cp.Succeeded, cp.Failed, cp.Canceled, n, c.BroadcastID); err != nil {
				return fmt.Errorf("add counters: %w", err)
			}
		}
		if err := addErrorCounts(ctx, tx, c.BroadcastID, cp.Errors); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, "SELECT cancel_requested FROM broadcasts WHERE id = ?", c.BroadcastID).Scan(&res.CancelRequested); err != nil {
			return fmt.Errorf("read cancel flag: %w", err)
		}
		c.Cursor = cp.Cursor
		return nil
	})
	if errors.Is(err, ErrLeaseLost) {
		return res, fmt.Errorf("chunk %d/%d: %w", c.BroadcastID, c.Seq, ErrLeaseLost)
	}
	return res, err
}

// FinishIfDone finishes the broadcast once every chunk is done: completed,
// or canceled if a cancel was requested, or failed if an error was stored.
// targeted becomes the exact number of targets that got an outcome. It
// reports whether this call finished it (one caller wins).
func (s *Store) FinishIfDone(ctx context.Context, id uint64) (bool, error) {
	var finished bool
	err := s.inTx(ctx, "finish broadcast", func(tx *sql.Tx) error {
		finished = false
		var status string
		var cancel bool
		var errText sql.NullString
		if err := tx.QueryRowContext(ctx, "SELECT status, cancel_requested, error FROM broadcasts WHERE id = ? FOR UPDATE", id).
			Scan(&status, &cancel, &errText); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("broadcast %d: %w", id, ErrNotFound)
			}
			return fmt.Errorf("lock broadcast: %w", err)
		}
		if Status(status).Final() {
			return nil
		}
		var open int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM broadcast_chunks WHERE broadcast_id = ? AND status <> 'done'", id).Scan(&open); err != nil {
			return fmt.Errorf("count open chunks: %w", err)
		}
		if open > 0 {
			return nil
		}
		final := StatusCompleted
		switch {
		case errText.Valid:
			final = StatusFailed
		case cancel:
			final = StatusCanceled
		}
		if _, err := tx.ExecContext(ctx, `UPDATE broadcasts SET status = ?, targeted = succeeded + failed + canceled,
			started_at = COALESCE(started_at, UTC_TIMESTAMP(6)), finished_at = UTC_TIMESTAMP(6) WHERE id = ?`, final, id); err != nil {
			return fmt.Errorf("finish: %w", err)
		}
		finished = true
		return nil
	})
	return finished, err
}

// RequestCancel flags a queued or running broadcast as canceled; every
// instance working on it stops at its next checkpoint.
func (s *Store) RequestCancel(ctx context.Context, id uint64) error {
	// A scheduled broadcast has no chunks yet: it simply ends.
	res, err := s.db.ExecContext(ctx, `UPDATE broadcasts SET status = 'canceled', cancel_requested = 1,
		finished_at = UTC_TIMESTAMP(6) WHERE id = ? AND status = 'scheduled'`, id)
	if err != nil {
		return fmt.Errorf("request cancel: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	res, err = s.db.ExecContext(ctx, "UPDATE broadcasts SET cancel_requested = 1 WHERE id = ? AND status IN ('queued', 'running')", id)
	if err != nil {
		return fmt.Errorf("request cancel: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	b, err := s.GetBroadcast(ctx, id)
	if err != nil {
		return err
	}
	if b.Status.Final() {
		return fmt.Errorf("broadcast %d is %s: %w", id, b.Status, ErrFinished)
	}
	return nil // already requested
}

// FailBroadcast stores why the broadcast cannot go on (the first reason
// wins) and stops it like a cancel; it ends as failed.
func (s *Store) FailBroadcast(ctx context.Context, id uint64, msg string) error {
	if _, err := s.db.ExecContext(ctx, "UPDATE broadcasts SET error = COALESCE(error, ?), cancel_requested = 1 WHERE id = ?",
		clampBytes(msg, maxErrorBytes), id); err != nil {
		return fmt.Errorf("fail broadcast: %w", err)
	}
	return nil
}

// SetLiveTargeted sets the targeted estimate of a broadcast that has not
// finished yet (FinishIfDone stores the exact figure).
func (s *Store) SetLiveTargeted(ctx context.Context, id uint64, n int64) error {
	if _, err := s.db.ExecContext(ctx, "UPDATE broadcasts SET targeted = ? WHERE id = ? AND finished_at IS NULL", n, id); err != nil {
		return fmt.Errorf("set targeted: %w", err)
	}
	return nil
}

// ChunkRow is a chunk as stored, for tests and operators.
type ChunkRow struct {
	Seq        int            `db:"seq"`
	LoID       uint64         `db:"lo_id"`
	HiID       uint64         `db:"hi_id"`
	Cursor     uint64         `db:"cursor_id"`
	Status     string         `db:"status"`
	LeaseOwner sql.NullString `db:"lease_owner"`
	Claims     int            `db:"claims"`
	Takeovers  int            `db:"takeovers"`
	Committed  int64          `db:"committed"`
	DoneBy     sql.NullString `db:"done_by"`
}

// ListChunks returns a broadcast's chunks in order.
func (s *Store) ListChunks(ctx context.Context, id uint64) ([]ChunkRow, error) {
	var out []ChunkRow
	if err := s.db.SelectContext(ctx, &out, `SELECT seq, lo_id, hi_id, cursor_id, status, lease_owner, claims, takeovers, committed, done_by
		FROM broadcast_chunks WHERE broadcast_id = ? ORDER BY seq`, id); err != nil {
		return nil, fmt.Errorf("list chunks: %w", err)
	}
	return out, nil
}
