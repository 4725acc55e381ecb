package consent

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"pushfan/audit"
	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// MaxSource is the longest source an answer may name, in characters
// (user_consents.source is VARCHAR(64)).
const MaxSource = 64

// maxActor is user_consent_history.actor's width: a token's name is
// clamped to it, never refused (the caller did nothing wrong).
const maxActor = 128

// FieldError is a refusal of one request field: Field names it as the
// API's JSON does (category, night, source, after), Code is a stable
// snake_case code.
type FieldError struct {
	Field, Code, Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func refuse(field, code, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Book reads and writes the bundled consent table for the configured
// categories. It is safe for concurrent use.
type Book struct {
	db  *sql.DB
	log *slog.Logger
	now func() time.Time
	// timeout bounds each call's statements (the database timeout):
	// a stuck database answers the caller, never holds it.
	timeout time.Duration
	// all are the configured categories by name; table, in configuration
	// order, those whose consent is read from the bundled table: the only
	// ones with answers to record.
	all   map[string]model.Category
	table []model.Category
}

// New returns the book over db (migrated) for categories, the configured
// ones (config.CategoryList); timeout bounds each call (0: the caller's
// context only).
func New(db *sql.DB, categories []model.Category, timeout time.Duration, log *slog.Logger) *Book {
	b := &Book{db: db, log: sqldb.OrDiscard(log), now: time.Now, timeout: timeout, all: map[string]model.Category{}}
	for _, c := range categories {
		b.all[c.Name] = c
		if c.Consent == model.ConsentTable {
			b.table = append(b.table, c)
		}
	}
	return b
}

// bound is ctx with the book's timeout.
func (b *Book) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if b.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, b.timeout)
}

// Answer is what a user answered for a category, and who recorded it.
type Answer struct {
	Granted bool
	// Night is the consent inside the category's night window, on top of
	// the day's: Night without Granted is refused.
	Night bool
	// Source is where the answer came from ("signup", "settings"), at
	// most MaxSource characters.
	Source string
	// Actor and RequestID are who recorded it (the API token's name) and
	// the request that did: kept in the history only.
	Actor, RequestID string
}

// Record is one answer in a user's history, as it was recorded.
type Record struct {
	Granted   bool      `json:"granted"`
	Night     bool      `json:"night"`
	Source    string    `json:"source"`
	Actor     string    `json:"actor"`
	RequestID string    `json:"request_id"`
	At        time.Time `json:"at"`
}

// tableCategory is category when its consent is read from the bundled
// table; any other is refused naming the field category.
func (b *Book) tableCategory(category string) error {
	c, ok := b.all[category]
	switch {
	case !ok && len(b.all) == 0:
		return refuse("category", "unknown_category", "%q is not in categories: none are configured", category)
	case !ok:
		return refuse("category", "unknown_category", "%q is not in categories", category)
	case c.Consent == "":
		return refuse("category", "no_consent_table", "category %q needs no consent beyond push_enabled, so there is nothing to record here", category)
	case c.Consent != model.ConsentTable:
		return refuse("category", "no_consent_table", "category %q reads its consent from the app's own users table (%s), so there is nothing to record here", category, c.Consent)
	}
	return nil
}

// Set records a's answer for the user and category: the current row
// (user_consents) and its proof (user_consent_history) in one
// transaction. updated_at is now on every call, changed_at only when
// granted or night changes (or on the first answer).
func (b *Book) Set(ctx context.Context, userID uint64, category string, a Answer) (model.Consent, error) {
	if err := b.tableCategory(category); err != nil {
		return model.Consent{}, err
	}
	if a.Night && !a.Granted {
		return model.Consent{}, refuse("night", "night_without_consent", "night consent is given on top of the day's: it needs granted true")
	}
	if n := utf8.RuneCountInString(a.Source); n > MaxSource {
		return model.Consent{}, refuse("source", "too_long", "source is %d characters; at most %d", n, MaxSource)
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	now := b.now().UTC().Truncate(time.Microsecond)
	c := model.Consent{UserID: userID, Category: category, Granted: a.Granted, Night: a.Night, Source: sqldb.ClampRunes(a.Source, MaxSource), Updated: now}
	err := sqldb.InTx(ctx, b.db, b.log, "recording a consent", func(tx *sql.Tx) error {
		// FOR UPDATE: two answers racing for one user and category
		// apply one after the other, each seeing the other's changed_at.
		var granted, night bool
		var changed time.Time
		err := tx.QueryRowContext(ctx, `SELECT granted, night, changed_at FROM user_consents
			WHERE user_id = ? AND category = ? FOR UPDATE`, userID, category).Scan(&granted, &night, &changed)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			c.Changed = now
			_, err = tx.ExecContext(ctx, `INSERT INTO user_consents (user_id, category, granted, night, updated_at, changed_at, source)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, userID, category, c.Granted, c.Night, now, now, c.Source)
		case err != nil:
			return fmt.Errorf("reading the current consent: %w", err)
		default:
			c.Changed = changed.UTC()
			if granted != c.Granted || night != c.Night {
				c.Changed = now
			}
			_, err = tx.ExecContext(ctx, `UPDATE user_consents SET granted = ?, night = ?, updated_at = ?, changed_at = ?, source = ?
				WHERE user_id = ? AND category = ?`, c.Granted, c.Night, now, c.Changed, c.Source, userID, category)
		}
		if err != nil {
			return fmt.Errorf("writing the consent: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO user_consent_history (user_id, category, granted, night, source, actor, request_id, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, userID, category, c.Granted, c.Night, c.Source,
			sqldb.ClampRunes(a.Actor, maxActor), sqldb.ClampRunes(a.RequestID, 64), now); err != nil {
			return fmt.Errorf("appending to the consent history: %w", err)
		}
		return audit.Write(ctx, tx) // the request's audit entry commits with the answer
	})
	if err != nil {
		return model.Consent{}, err
	}
	return c, nil
}

// Get is the user's consent for every category read from the bundled
// table, in configuration order: one without an answer is not granted,
// with zero Updated and Changed. One primary-key range read.
func (b *Book) Get(ctx context.Context, userID uint64) ([]model.Consent, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	rows, err := b.db.QueryContext(ctx, `SELECT category, granted, night, source, updated_at, changed_at
		FROM user_consents WHERE user_id = ?`, userID)
	if err != nil {
		return nil, fmt.Errorf("reading user %d's consents: %w", userID, err)
	}
	defer rows.Close()
	stored := map[string]model.Consent{}
	for rows.Next() {
		c := model.Consent{UserID: userID}
		if err := rows.Scan(&c.Category, &c.Granted, &c.Night, &c.Source, &c.Updated, &c.Changed); err != nil {
			return nil, fmt.Errorf("reading user %d's consents: %w", userID, err)
		}
		c.Updated, c.Changed = c.Updated.UTC(), c.Changed.UTC()
		stored[c.Category] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading user %d's consents: %w", userID, err)
	}
	// Rows of a category no longer configured (or no longer `table`)
	// are kept as they are, and not shown.
	out := make([]model.Consent, 0, len(b.table))
	for _, cat := range b.table {
		c, ok := stored[cat.Name]
		if !ok {
			c = model.Consent{UserID: userID, Category: cat.Name}
		}
		out = append(out, c)
	}
	return out, nil
}

// History is the user's answers for category, newest first, at most
// limit of them: the proof of what they answered, when, and who recorded
// it.
func (b *Book) History(ctx context.Context, userID uint64, category string, limit int) ([]Record, error) {
	if err := b.tableCategory(category); err != nil {
		return nil, err
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	rows, err := b.db.QueryContext(ctx, `SELECT granted, night, source, actor, request_id, at
		FROM user_consent_history FORCE INDEX (idx_user_consent_history_user)
		WHERE user_id = ? AND category = ? ORDER BY id DESC LIMIT ?`, userID, category, limit)
	if err != nil {
		return nil, fmt.Errorf("reading user %d's %s consent history: %w", userID, category, err)
	}
	defer rows.Close()
	out := []Record{}
	for rows.Next() {
		var r Record
		if err := rows.Scan(&r.Granted, &r.Night, &r.Source, &r.Actor, &r.RequestID, &r.At); err != nil {
			return nil, fmt.Errorf("reading user %d's %s consent history: %w", userID, category, err)
		}
		r.At = r.At.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading user %d's %s consent history: %w", userID, category, err)
	}
	return out, nil
}
