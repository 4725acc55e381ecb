package repository

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// OutcomeToken is one token row of a user, as a look-up of the kept
// outcomes reads it (package outcomes): dead ones too.
type OutcomeToken struct {
	ID       uint64
	Platform string
}

// UserTokens lists every token row user has in the app's tokens table
// (the bundled device_tokens or the app's mapped table, its app's rows
// only when the table has an app column), dead ones included: a dead
// token was sent to before it died. By token id.
func (s *Store) UserTokens(ctx context.Context, user uint64) ([]OutcomeToken, error) {
	sc := s.schema
	platform := "''"
	if sc.tPlatform != "" {
		platform = "COALESCE(" + sc.tPlatform + ", '')"
	}
	q := "SELECT " + sc.tID + ", " + platform + " FROM " + sc.tokensTable + " t WHERE " + sc.ownedAnd(sc.tUser+" = ?") + " ORDER BY " + sc.tID
	rows, err := s.db.QueryContext(ctx, q, user)
	if err != nil {
		return nil, fmt.Errorf("read user %d's tokens: %w", user, err)
	}
	defer rows.Close()
	var out []OutcomeToken
	for rows.Next() {
		var t OutcomeToken
		if err := rows.Scan(&t.ID, &t.Platform); err != nil {
			return nil, fmt.Errorf("read user %d's tokens: %w", user, err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// TokenUsers maps the token ids ids of the app's tokens table to their
// users; a row deleted since maps to none.
func (s *Store) TokenUsers(ctx context.Context, ids []uint64) (map[uint64]uint64, error) {
	out := make(map[uint64]uint64, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	sc := s.schema
	q, args, err := sqlx.In("SELECT "+sc.tID+", "+sc.tUser+" FROM "+sc.tokensTable+" t WHERE "+sc.tID+" IN (?)", ids)
	if err != nil {
		return nil, fmt.Errorf("read the tokens' users: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read the tokens' users: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, u uint64
		if err := rows.Scan(&id, &u); err != nil {
			return nil, fmt.Errorf("read the tokens' users: %w", err)
		}
		out[id] = u
	}
	return out, rows.Err()
}
