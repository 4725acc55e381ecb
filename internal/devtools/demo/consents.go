package demo

import (
	"context"
	"fmt"
)

// SeedDemoConsents records, in the bundled consent table, the example
// configuration's advertising consents (examples/pushfan.yaml,
// docs/consent.md) for users 1..users: two users in five opted in, one in
// five at night too, one in ten said no. The rest never answered. A row
// already there is kept (a user's answer is theirs, not the demo's).
func (s *Seeder) SeedDemoConsents(ctx context.Context, users int) (int64, error) {
	res, err := s.db.ExecContext(ctx, `INSERT IGNORE INTO user_consents (user_id, category, granted, night, updated_at, changed_at, source)
		SELECT id, 'advertising', id % 5 IN (1, 2), id % 5 = 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'demo'
		FROM users WHERE id <= ? AND (id % 5 IN (1, 2) OR id % 10 = 3)`, users)
	if err != nil {
		return 0, fmt.Errorf("seed demo consents: %w", err)
	}
	return res.RowsAffected()
}
