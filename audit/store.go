package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// Column widths (migration 00034): longer values are clamped, never
// refused, so that an entry is always stored with its change.
const (
	maxActorRunes  = 255
	maxTargetRunes = 255
	maxAction      = 64
	maxIP          = 64
	maxRequestID   = 64
)

const insertEntry = `INSERT INTO audit_entries (at, actor_kind, actor_id, actor_name, action, target, ip, request_id, detail)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

// Write inserts the entry ctx's request will record (WithPending) in tx,
// the transaction that stores the request's change, so that both commit
// or neither does. It writes nothing for a context without one (the
// change was not a request's: a planner's step, a cron fire's own).
func Write(ctx context.Context, tx sqldb.Execer) error {
	p := from(ctx)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	e := p.complete()
	p.mu.Unlock()
	if err := insert(ctx, tx, e); err != nil {
		return err
	}
	p.mu.Lock()
	p.written = true
	p.mu.Unlock()
	return nil
}

func insert(ctx context.Context, q sqldb.Execer, e model.AuditEntry) error {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	var detail any
	if len(e.Detail) > 0 {
		detail = sqldb.ClampBytes(string(e.Detail), sqldb.MaxTextBytes)
	}
	_, err := q.ExecContext(ctx, insertEntry, e.At.UTC(), sqldb.ClampBytes(string(e.Actor.Kind), 16),
		sqldb.ClampRunes(e.Actor.ID, maxActorRunes), sqldb.ClampRunes(e.Actor.Name, maxActorRunes),
		sqldb.ClampBytes(e.Action, maxAction), sqldb.ClampRunes(e.Target, maxTargetRunes),
		sqldb.ClampBytes(e.IP, maxIP), sqldb.ClampBytes(e.RequestID, maxRequestID), detail)
	if err != nil {
		return fmt.Errorf("append audit entry %s: %w", e.Action, err)
	}
	return nil
}

// Store reads and appends the audit trail.
type Store struct {
	db *sql.DB
}

// NewStore returns the trail stored in db.
func NewStore(db *sql.DB) *Store { return &Store{db: db} }

// Record appends e in a transaction of its own: for what changes nothing
// else (a sign-in, a refused one, a test send, a reload).
func (s *Store) Record(ctx context.Context, e model.AuditEntry) error {
	return insert(ctx, s.db, e)
}

// Filter selects entries: each set field must match exactly (Actor the
// actor's id or name); After is a cursor (an entry's id: older ones
// follow); Limit bounds a page.
type Filter struct {
	Actor, Action, Target string
	After                 uint64
	Limit                 int
}

// The page sizes of List.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// exportPage is how many entries Export reads at a time: its memory is
// one page, whatever the trail's length.
const exportPage = 500

const selectEntries = `SELECT id, at, actor_kind, actor_id, actor_name, action, target, ip, request_id, detail FROM audit_entries`

// List returns f's page of entries, newest first, and the cursor of the
// next page (0 when this was the last).
func (s *Store) List(ctx context.Context, f Filter) ([]model.AuditEntry, uint64, error) {
	if f.Limit <= 0 || f.Limit > MaxLimit {
		f.Limit = DefaultLimit
	}
	out, err := s.page(ctx, f, f.Limit+1)
	if err != nil {
		return nil, 0, err
	}
	if len(out) <= f.Limit {
		return out, 0, nil
	}
	out = out[:f.Limit]
	return out, out[len(out)-1].ID, nil
}

// Export calls fn with every entry f selects, newest first, reading a
// page at a time (each a short statement: no read holds a snapshot or a
// connection while the caller writes).
func (s *Store) Export(ctx context.Context, f Filter, fn func(model.AuditEntry) error) error {
	for {
		page, err := s.page(ctx, f, exportPage)
		if err != nil {
			return err
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return err
			}
		}
		if len(page) < exportPage {
			return nil
		}
		f.After = page[len(page)-1].ID
	}
}

// page reads up to n entries f selects, by id downwards: each filter has
// an index ending in id (migration 00034), so the read stops after n.
func (s *Store) page(ctx context.Context, f Filter, n int) ([]model.AuditEntry, error) {
	var where []string
	var args []any
	if f.Actor != "" {
		where = append(where, "(actor_id = ? OR actor_name = ?)")
		args = append(args, f.Actor, f.Actor)
	}
	if f.Action != "" {
		where = append(where, "action = ?")
		args = append(args, f.Action)
	}
	if f.Target != "" {
		where = append(where, "target = ?")
		args = append(args, f.Target)
	}
	if f.After > 0 {
		where = append(where, "id < ?")
		args = append(args, f.After)
	}
	q := selectEntries
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT " + strconv.Itoa(n)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read audit entries: %w", err)
	}
	defer rows.Close()
	var out []model.AuditEntry
	for rows.Next() {
		var e model.AuditEntry
		var detail sql.NullString
		if err := rows.Scan(&e.ID, &e.At, &e.Actor.Kind, &e.Actor.ID, &e.Actor.Name, &e.Action, &e.Target, &e.IP, &e.RequestID, &detail); err != nil {
			return nil, fmt.Errorf("read audit entries: %w", err)
		}
		e.At = e.At.UTC()
		if detail.Valid && json.Valid([]byte(detail.String)) {
			e.Detail = json.RawMessage(detail.String)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read audit entries: %w", err)
	}
	return out, nil
}

// FieldError is a refused query parameter of the audit routes, naming it
// (the server answers it as a 400).
type FieldError struct {
	Field, Code, Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }
