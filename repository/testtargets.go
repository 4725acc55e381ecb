package repository

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
)

// A test send (POST /push/test) names a few users or raw tokens; these
// reads resolve them. They are bounded by the caller (at most a few dozen
// keys), so each is one indexed IN lookup.

// TestUser is one user of a test send and its valid tokens.
type TestUser struct {
	UserID      uint64
	Exists      bool // a users row exists
	PushEnabled bool
	Tokens      []Target // valid tokens (invalidated_at IS NULL), by id; not stale ones (PUSHFAN_STALE_AFTER)
	// Platforms is each token's platform (android, ios, web) by token id,
	// where the tokens table has one.
	Platforms map[uint64]string
	// A user whose every token is invalidated: when the last one was and
	// by which code (the built-in tables only; a mapped one keeps no such
	// record). Zero otherwise.
	InvalidatedAt time.Time
	InvalidReason string
}

// TestUsers returns, for each id (in the order given), the user and its
// valid tokens, as the audience rule reads them (docs/api.md, "POST
// /push/broadcast"): the caller decides what a disabled user gets.
func (s *Store) TestUsers(ctx context.Context, ids []uint64) ([]TestUser, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	sc := s.schema
	q, args, err := sqlx.In("SELECT "+sc.uID+", "+sc.enabledValue()+", "+sc.tID+", "+sc.tToken+", "+or(sc.tPlatform, "NULL")+" FROM "+sc.usersTable+" u"+
		" LEFT JOIN "+sc.tokensTable+" t ON "+sc.tUser+" = "+sc.uID+" AND "+sc.ownedAnd(sc.validFresh())+
		" WHERE "+sc.uID+" IN (?) ORDER BY "+sc.uID+", "+sc.tID, ids)
	if err != nil {
		return nil, fmt.Errorf("test users: expand ids: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, s.db.Rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("test users: %w", err)
	}
	defer rows.Close()
	byID := make(map[uint64]*TestUser, len(ids))
	for rows.Next() {
		var uid uint64
		var enabled bool
		var tid *uint64
		var tok, platform *string
		if err := rows.Scan(&uid, &enabled, &tid, &tok, &platform); err != nil {
			return nil, fmt.Errorf("test users: scan: %w", err)
		}
		u := byID[uid]
		if u == nil {
			u = &TestUser{UserID: uid, Exists: true, PushEnabled: enabled}
			byID[uid] = u
		}
		if tid != nil && tok != nil {
			u.Tokens = append(u.Tokens, Target{TokenID: *tid, UserID: uid, Token: *tok})
			if platform != nil && *platform != "" {
				if u.Platforms == nil {
					u.Platforms = map[uint64]string{}
				}
				u.Platforms[*tid] = *platform
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("test users: %w", err)
	}
	if !sc.mapped {
		if err := s.lastInvalidations(ctx, byID); err != nil {
			return nil, err
		}
	}
	out := make([]TestUser, len(ids))
	for i, id := range ids {
		if u := byID[id]; u != nil {
			out[i] = *u
		} else {
			out[i] = TestUser{UserID: id}
		}
	}
	return out, nil
}

// lastInvalidations fills in, for each user of byID without a valid
// token whose every token is invalidated, the last invalidation's time
// and code: what "no valid tokens" means for that user.
func (s *Store) lastInvalidations(ctx context.Context, byID map[uint64]*TestUser) error {
	var ids []uint64
	for id, u := range byID {
		if len(u.Tokens) == 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	q, args, err := sqlx.In("SELECT t.user_id, t.invalidated_at, t.invalid_reason FROM device_tokens t WHERE "+s.schema.ownedAnd("t.user_id IN (?)")+
		" ORDER BY t.user_id, t.invalidated_at IS NULL DESC, t.invalidated_at DESC", ids)
	if err != nil {
		return fmt.Errorf("test users: expand ids: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, s.db.Rebind(q), args...)
	if err != nil {
		return fmt.Errorf("test users' invalidations: %w", err)
	}
	defer rows.Close()
	seen := map[uint64]bool{}
	for rows.Next() {
		var uid uint64
		var at *time.Time
		var reason *string
		if err := rows.Scan(&uid, &at, &reason); err != nil {
			return fmt.Errorf("test users' invalidations: scan: %w", err)
		}
		// The first row of a user is a valid (stale) token if there is
		// one: then invalidation is not why it got nothing.
		if seen[uid] {
			continue
		}
		seen[uid] = true
		if at != nil {
			byID[uid].InvalidatedAt = at.UTC()
			if reason != nil {
				byID[uid].InvalidReason = *reason
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("test users' invalidations: %w", err)
	}
	return nil
}

// KnownToken is a device_tokens row found by its token.
type KnownToken struct {
	TokenID     uint64
	UserID      uint64
	Invalidated bool
	Stale       bool   // not refreshed within PUSHFAN_STALE_AFTER (false while it is off)
	Platform    string // android, ios, web; "" where the table has none
}

// LookupTokens returns the device_tokens rows of the given tokens, keyed
// by token; a token absent from the map is unknown to pushfan.
func (s *Store) LookupTokens(ctx context.Context, tokens []string) (map[string]KnownToken, error) {
	out := make(map[string]KnownToken, len(tokens))
	if len(tokens) == 0 {
		return out, nil
	}
	sc := s.schema
	q, args, err := sqlx.In("SELECT "+sc.tID+", "+sc.tUser+", "+sc.tToken+", "+sc.invalidValue()+", "+or(sc.staleValue, "0")+", "+or(sc.tPlatform, "NULL")+
		" FROM "+sc.tokensTable+" t WHERE "+sc.ownedAnd(sc.tToken+" IN (?)"), tokens)
	if err != nil {
		return nil, fmt.Errorf("lookup tokens: expand: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, s.db.Rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("lookup tokens: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k KnownToken
		var tok string
		var platform *string
		if err := rows.Scan(&k.TokenID, &k.UserID, &tok, &k.Invalidated, &k.Stale, &platform); err != nil {
			return nil, fmt.Errorf("lookup tokens: scan: %w", err)
		}
		if platform != nil {
			k.Platform = *platform
		}
		out[tok] = k
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lookup tokens: %w", err)
	}
	return out, nil
}

// validFresh is the tokens' valid condition and, with the stale rule on,
// their freshness: a test send's user_ids get the tokens a broadcast
// would send to.
func (sc *Schema) validFresh() string {
	if sc.fresh == "" {
		return sc.valid
	}
	return "(" + sc.valid + " AND " + sc.fresh + ")"
}

// staleLookup bounds the IN list of one StaleTokens statement, below
// MariaDB's in_predicate_conversion_threshold (1000), as invalidateChunk.
const staleLookup = 500

// StaleTokens returns which of tokens are rows of the tokens table that
// the stale rule (PUSHFAN_STALE_AFTER) leaves out: how a named audience's
// page, whose query need not know the rule, is held to it. A token the
// table does not hold is not stale (nothing says when it was last seen).
// Each statement is up to staleLookup probes of the token's unique key.
// nil while the rule is off.
func (s *Store) StaleTokens(ctx context.Context, tokens []string) (map[string]bool, error) {
	sc := s.schema
	if sc.fresh == "" || len(tokens) == 0 {
		return nil, nil
	}
	var out map[string]bool
	for chunk := range slices.Chunk(tokens, staleLookup) {
		q, args, err := sqlx.In("SELECT "+sc.tToken+" FROM "+sc.tokensTable+" t WHERE "+sc.tToken+" IN (?) AND "+sc.staleValue, chunk)
		if err != nil {
			return nil, fmt.Errorf("stale tokens: expand: %w", err)
		}
		rows, err := s.db.QueryContext(ctx, s.db.Rebind(q), args...)
		if err != nil {
			return nil, fmt.Errorf("stale tokens: %w", err)
		}
		for rows.Next() {
			var tok string
			if err := rows.Scan(&tok); err != nil {
				rows.Close()
				return nil, fmt.Errorf("stale tokens: scan: %w", err)
			}
			if out == nil {
				out = map[string]bool{}
			}
			out[tok] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("stale tokens: %w", err)
		}
	}
	return out, nil
}
