package outcomes

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Apps reads what the kept outcomes name from the apps' own tables: an
// app's tokens may live in a table of its own (the apps' schema mapping,
// docs/audiences-and-schema.md), so the reader asks the app's store
// (repository.Store, wired by cmd/pushfan/app) rather than reading
// device_tokens.
type Apps interface {
	// UserTokens lists every token row user has in each app's tokens
	// table, dead ones too (sent to before they died).
	UserTokens(ctx context.Context, user uint64) ([]AppToken, error)
	// TokenUsers maps token ids of app's tokens table to their users.
	TokenUsers(ctx context.Context, app string, ids []uint64) (map[uint64]uint64, error)
	// AudienceRange lists up to limit cursors of broadcast id's audience
	// in (after, upto], ascending, as its run would read them now (the
	// app's tokens, its category's consent, the stale rule).
	AudienceRange(ctx context.Context, id, after, upto uint64, limit int) ([]uint64, error)
}

// AppToken is one of a user's tokens in an app's table. App "" is a
// token of the bundled table read without an app: it is looked up in
// every app's broadcasts.
type AppToken struct {
	App      string
	ID       uint64
	Platform string
}

// errNoAudience: a canceled broadcast's never-read targets need the
// audience read, and the reader was built without Apps (a test's).
var errNoAudience = errors.New("listing a cancel's never-read targets needs the apps' audiences (Reader.Apps)")

// apps is r.Apps, or the bundled device_tokens read directly.
func (r *Reader) apps() Apps {
	if r.Apps != nil {
		return r.Apps
	}
	return bundled{r.DB}
}

// Bundled is Apps over the bundled device_tokens table, for every app;
// it cannot read an audience (AudienceRange fails).
func Bundled(db *sql.DB) Apps { return bundled{db} }

// bundled reads the bundled device_tokens table for every app.
type bundled struct{ db *sql.DB }

func (b bundled) UserTokens(ctx context.Context, user uint64) ([]AppToken, error) {
	rows, err := b.db.QueryContext(ctx, "SELECT id, COALESCE(platform, '') FROM device_tokens WHERE user_id = ? ORDER BY id", user)
	if err != nil {
		return nil, fmt.Errorf("read the user's tokens: %w", err)
	}
	defer rows.Close()
	var out []AppToken
	for rows.Next() {
		var t AppToken
		if err := rows.Scan(&t.ID, &t.Platform); err != nil {
			return nil, fmt.Errorf("read the user's tokens: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func (b bundled) TokenUsers(ctx context.Context, _ string, ids []uint64) (map[uint64]uint64, error) {
	m := make(map[uint64]uint64, len(ids))
	if len(ids) == 0 {
		return m, nil
	}
	rows, err := b.db.QueryContext(ctx, "SELECT id, user_id FROM device_tokens WHERE id IN ("+marks(len(ids))+")", anys(ids)...)
	if err != nil {
		return nil, fmt.Errorf("read the targets' users: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, u uint64
		if err := rows.Scan(&id, &u); err != nil {
			return nil, fmt.Errorf("read the targets' users: %w", err)
		}
		m[id] = u
	}
	return m, rows.Err()
}

func (bundled) AudienceRange(context.Context, uint64, uint64, uint64, int) ([]uint64, error) {
	return nil, errNoAudience
}
