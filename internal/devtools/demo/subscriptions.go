package demo

import (
	"context"
	"fmt"
)

// SeedDemoSubscriptions creates the demo `subscriptions` table of the
// example configuration (examples/pushfan.yaml) if it is missing, and gives
// each of users 1..users a subscription renewing 0-6 days from today, with
// reminders on for three users in four. It stands for a deployment's own
// table: pushfan itself never reads it except through a named audience.
func (s *Seeder) SeedDemoSubscriptions(ctx context.Context, users int) (int64, error) {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS subscriptions (
		user_id   BIGINT UNSIGNED NOT NULL PRIMARY KEY,
		plan      VARCHAR(32)     NOT NULL,
		amount    DECIMAL(10,2)   NOT NULL,
		renews_on DATE            NOT NULL,
		reminders TINYINT(1)      NOT NULL DEFAULT 1,
		KEY idx_subscriptions_renews_on (renews_on)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`); err != nil {
		return 0, fmt.Errorf("create demo subscriptions: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `INSERT IGNORE INTO subscriptions (user_id, plan, amount, renews_on, reminders)
		SELECT id, IF(id % 3 = 0, 'family', 'pro'), IF(id % 3 = 0, 14.90, 9.90),
		       UTC_DATE() + INTERVAL (id % 7) DAY, id % 4 <> 0
		FROM users WHERE id <= ?`, users)
	if err != nil {
		return 0, fmt.Errorf("seed demo subscriptions: %w", err)
	}
	return res.RowsAffected()
}
