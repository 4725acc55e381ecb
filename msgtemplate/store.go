// Package msgtemplate is the message templates a team saves and reuses
// when composing (docs/api.md#message-templates): a named title, body,
// data and link, kept in MySQL (migration 00037) so that everyone of the
// deployment sees the same ones.
//
// A template's text may use the message template syntax ({{.first_name}}):
// each write is parsed as a broadcast's message would be (audience's
// ParseTemplate), so a template that saves is one that sends; the
// variables are filled per user from a named audience's columns when a
// broadcast is sent. Every write stores the request's audit entry in its
// own transaction (audit.Write).
package msgtemplate

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"pushfan/audience"
	"pushfan/audit"
	"pushfan/internal/platform/sqldb"
)

// The limits of a template: a name a list shows on one line, and texts
// no notification needs more of (FCM's whole payload is 4 KB).
const (
	MaxName  = 64
	MaxTitle = 1024
	MaxBody  = 4096
	MaxData  = 50 // keys
	// MaxDataBytes bounds data's keys and values together.
	MaxDataBytes = 4096
	MaxLink      = 2048
)

// Template is one saved template, as the API shows it.
type Template struct {
	Name      string            `json:"name"`
	Title     string            `json:"title"`
	Body      string            `json:"body"`
	Data      map[string]string `json:"data"`
	Link      string            `json:"link"`
	CreatedAt time.Time         `json:"created_at"`
	CreatedBy string            `json:"created_by"`
	UpdatedAt time.Time         `json:"updated_at"`
	UpdatedBy string            `json:"updated_by"`
}

// Spec is what a write sets.
type Spec struct {
	Name, Title, Body, Link string
	Data                    map[string]string
	By                      string // who saves it (a display name)
}

// FieldError names the field of a refused write.
type FieldError struct {
	Field, Code, Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func refuse(field, code, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Code: code, Message: fmt.Sprintf(format, args...)}
}

var (
	// ErrNotFound: no template has the name.
	ErrNotFound = errors.New("no such template")
	// ErrExists: a create named a template that exists (PUT replaces it).
	ErrExists = errors.New("template exists")
)

// Store keeps the templates.
type Store struct {
	db      *sql.DB
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time
}

// New is the templates of db; each statement is bounded by timeout.
func New(db *sql.DB, timeout time.Duration, log *slog.Logger) *Store {
	return &Store{db: db, timeout: timeout, log: sqldb.OrDiscard(log), now: time.Now}
}

// check refuses a bad spec, naming its first bad field (a PUT's name is
// its path's, checked the same way).
func check(sp Spec) error {
	n := strings.TrimSpace(sp.Name)
	switch {
	case n == "":
		return refuse("name", "required", "name is required: a short name your team will recognise, such as \"winter-sale\"")
	case n != sp.Name:
		return refuse("name", "invalid_value", "name must not start or end with spaces")
	case utf8.RuneCountInString(n) > MaxName:
		return refuse("name", "too_long", "name is longer than %d characters", MaxName)
	case strings.ContainsFunc(n, func(r rune) bool { return unicode.IsControl(r) || r == '/' }):
		return refuse("name", "invalid_value", "name must not hold control characters or a slash")
	}
	if sp.Title == "" && sp.Body == "" {
		return refuse("body", "required", "a template needs a title or a body")
	}
	if utf8.RuneCountInString(sp.Title) > MaxTitle {
		return refuse("title", "too_long", "title is longer than %d characters", MaxTitle)
	}
	if utf8.RuneCountInString(sp.Body) > MaxBody {
		return refuse("body", "too_long", "body is longer than %d characters", MaxBody)
	}
	if len(sp.Data) > MaxData {
		return refuse("data", "too_many", "data has %d keys; at most %d", len(sp.Data), MaxData)
	}
	size := 0
	for k, v := range sp.Data {
		if strings.TrimSpace(k) == "" {
			return refuse("data", "invalid_value", "every data value needs a key")
		}
		size += len(k) + len(v)
	}
	// FCM takes 4,096 bytes of payload in all; the column holds 64 KiB,
	// and a larger value would be cut (or refused with a 500) and break
	// the list for everyone.
	if size > MaxDataBytes {
		return refuse("data", "too_long", "data's keys and values are %d bytes; at most %d (FCM's whole payload is 4,096)", size, MaxDataBytes)
	}
	if sp.Link != "" {
		u, err := url.Parse(sp.Link)
		templated := strings.Contains(sp.Link, "{{")
		if len(sp.Link) > MaxLink || (!templated && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "")) {
			return refuse("link", "invalid_value", "link must be an http(s) URL of at most %d bytes, e.g. https://shop.example.com/sale", MaxLink)
		}
	}
	// The text as a broadcast's message would be parsed: no variable list
	// (the audience is chosen when it is sent), the syntax only.
	if _, err := audience.ParseTemplate(sp.Title, sp.Body, sp.Data, nil); err != nil {
		return refuse("body", "invalid_template", "the text's {{ }} parts do not parse: %v", err)
	}
	return nil
}

const columns = "name, title, body, data, link, created_at, created_by, updated_at, updated_by"

func scan(row interface{ Scan(...any) error }) (Template, error) {
	var t Template
	var data sql.NullString
	if err := row.Scan(&t.Name, &t.Title, &t.Body, &data, &t.Link, &t.CreatedAt, &t.CreatedBy, &t.UpdatedAt, &t.UpdatedBy); err != nil {
		return t, err
	}
	t.Data = map[string]string{}
	if data.Valid {
		if err := json.Unmarshal([]byte(data.String), &t.Data); err != nil {
			return t, fmt.Errorf("template %q: decode data: %w", t.Name, err)
		}
	}
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return t, nil
}

// List is every template, by name.
func (s *Store) List(ctx context.Context) ([]Template, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, "SELECT "+columns+" FROM message_templates ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	defer rows.Close()
	out := []Template{}
	for rows.Next() {
		t, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("list templates: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	return out, nil
}

// Create stores a new template; ErrExists when the name is taken.
func (s *Store) Create(ctx context.Context, sp Spec) (Template, error) {
	if err := check(sp); err != nil {
		return Template{}, err
	}
	data, err := encodeData(sp.Data)
	if err != nil {
		return Template{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	by := sqldb.ClampRunes(sp.By, 128)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err = sqldb.InTx(ctx, s.db, s.log, "create template", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO message_templates ("+columns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			sp.Name, sp.Title, sp.Body, data, sp.Link, now, by, now, by); err != nil {
			if sqldb.IsDuplicateEntry(err) {
				return ErrExists
			}
			return fmt.Errorf("insert: %w", err)
		}
		audit.Created(ctx, "template", sp.Name)
		return audit.Write(ctx, tx)
	})
	if err != nil {
		return Template{}, fmt.Errorf("template %q: %w", sp.Name, err)
	}
	return Template{Name: sp.Name, Title: sp.Title, Body: sp.Body, Data: orEmpty(sp.Data), Link: sp.Link,
		CreatedAt: now, CreatedBy: by, UpdatedAt: now, UpdatedBy: by}, nil
}

// Update replaces the template sp.Name's text; ErrNotFound when there is none.
func (s *Store) Update(ctx context.Context, sp Spec) (Template, error) {
	if err := check(sp); err != nil {
		return Template{}, err
	}
	data, err := encodeData(sp.Data)
	if err != nil {
		return Template{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	by := sqldb.ClampRunes(sp.By, 128)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var out Template
	err = sqldb.InTx(ctx, s.db, s.log, "update template", func(tx *sql.Tx) error {
		t, err := scan(tx.QueryRowContext(ctx, "SELECT "+columns+" FROM message_templates WHERE name = ? FOR UPDATE", sp.Name))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE message_templates SET title = ?, body = ?, data = ?, link = ?, updated_at = ?, updated_by = ? WHERE name = ?",
			sp.Title, sp.Body, data, sp.Link, now, by, sp.Name); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		out = Template{Name: sp.Name, Title: sp.Title, Body: sp.Body, Data: orEmpty(sp.Data), Link: sp.Link,
			CreatedAt: t.CreatedAt, CreatedBy: t.CreatedBy, UpdatedAt: now, UpdatedBy: by}
		return audit.Write(ctx, tx)
	})
	if err != nil {
		return Template{}, fmt.Errorf("template %q: %w", sp.Name, err)
	}
	return out, nil
}

// Delete removes the template name; ErrNotFound when there is none.
func (s *Store) Delete(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := sqldb.InTx(ctx, s.db, s.log, "delete template", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM message_templates WHERE name = ?", name)
		if err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		if n == 0 {
			return ErrNotFound
		}
		return audit.Write(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("template %q: %w", name, err)
	}
	return nil
}

func encodeData(d map[string]string) (any, error) {
	if len(d) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode data: %w", err)
	}
	return string(raw), nil
}

func orEmpty(d map[string]string) map[string]string {
	if d == nil {
		return map[string]string{}
	}
	return d
}
