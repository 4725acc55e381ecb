package repository

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"pushfan/model"
)

// resendFilter is audienceFilter's condition for a resend: the tokens that
// failed in broadcast a.ResendOf with one of a.Codes and are still valid
// (base). The semi-join reads idx_broadcast_failures_token, a range of
// token ids within that broadcast, so a page or a chunk count reads only
// the failures in its own token range.
func resendFilter(sc *Schema, a model.Audience) (string, []any, bool, error) {
	if len(a.Codes) == 0 {
		return "", nil, true, nil
	}
	cond, args, err := sqlx.In(sc.base+" AND "+sc.tID+" IN (SELECT f.token_id FROM broadcast_failures f WHERE f.broadcast_id = ? AND f.code IN (?))",
		a.ResendOf, a.Codes)
	if err != nil {
		return "", nil, false, fmt.Errorf("expand resend codes: %w", err)
	}
	return cond, args, false, nil
}

// ResendFailures reports whether broadcast id has failure rows with one of
// codes that a resend can select (with a token id), and whether it has
// any without one (a named audience that returns no token ids), which no
// resend can reach. Each is an index probe that stops at the first such
// row, however many failures the broadcast has: a resend's submit answers
// at once, and its plan counts the targets.
func (s *Store) ResendFailures(ctx context.Context, id uint64, codes []string) (resolvable, unresolvable bool, err error) {
	if len(codes) == 0 {
		return false, false, nil
	}
	q, args, err := sqlx.In(`SELECT EXISTS (SELECT 1 FROM broadcast_failures WHERE broadcast_id = ? AND code IN (?) AND token_id <> 0),
		EXISTS (SELECT 1 FROM broadcast_failures WHERE broadcast_id = ? AND code IN (?) AND token_id = 0)`, id, codes, id, codes)
	if err != nil {
		return false, false, fmt.Errorf("resend failures: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&resolvable, &unresolvable); err != nil {
		return false, false, fmt.Errorf("resend failures of broadcast %d: %w", id, err)
	}
	return resolvable, unresolvable, nil
}
