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

// ResendFailures counts broadcast id's failure rows with one of codes:
// those with a token id a resend can select, and those without one (a
// named audience that returns no token ids), which no resend can reach.
func (s *Store) ResendFailures(ctx context.Context, id uint64, codes []string) (resolvable, unresolvable int64, err error) {
	if len(codes) == 0 {
		return 0, 0, nil
	}
	q, args, err := sqlx.In(`SELECT COALESCE(SUM(token_id <> 0), 0), COALESCE(SUM(token_id = 0), 0)
		FROM broadcast_failures WHERE broadcast_id = ? AND code IN (?)`, id, codes)
	if err != nil {
		return 0, 0, fmt.Errorf("resend failures: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&resolvable, &unresolvable); err != nil {
		return 0, 0, fmt.Errorf("resend failures of broadcast %d: %w", id, err)
	}
	return resolvable, unresolvable, nil
}
