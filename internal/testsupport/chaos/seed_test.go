package chaos

import (
	"fmt"
	"strings"
	"time"
)

// zones are the users' time zones, user id modulo 4. The first two are
// those a local-time broadcast is due in during the run: the load aims it
// a little ahead of Kathmandu's wall clock, which Tokyo has passed already
// (due at once); UTC and New York would be due hours later.
var zones = []string{"Asia/Tokyo", "Asia/Kathmandu", "UTC", "America/New_York"}

// seed inserts users 1..n with one token each: "c-<id>", except every
// 100th user's, which the emulator answers UNREGISTERED (failures to
// count, tokens to invalidate, something for a resend to cover).
func (s *stack) seed() {
	n := s.cfg.users
	quoted := make([]string, len(zones))
	for i, z := range zones {
		quoted[i] = "'" + z + "'"
	}
	for _, q := range []string{
		fmt.Sprintf("INSERT INTO users (id, timezone) SELECT seq, ELT(1 + seq %% %d, %s) FROM seq_1_to_%d", len(zones), strings.Join(quoted, ","), n),
		fmt.Sprintf(`INSERT INTO device_tokens (user_id, token, platform)
			SELECT seq, IF(seq %% 100 = 0, CONCAT('unregistered-c-', seq), CONCAT('c-', seq)), 'android' FROM seq_1_to_%d ORDER BY seq`, n),
		// Every 10th user has a second device: a frequency cap's answer is
		// the user's, so both get the same one, though their token ids
		// are far apart (in different chunks).
		fmt.Sprintf(`INSERT INTO device_tokens (user_id, token, platform)
			SELECT seq, CONCAT('c2-', seq), 'ios' FROM seq_1_to_%d WHERE seq %% 10 = 0 ORDER BY seq`, n),
		"ANALYZE TABLE users, device_tokens",
	} {
		if _, err := s.db.Exec(q); err != nil {
			s.t.Fatalf("seeding: %v", err)
		}
	}
}

// cronJob fires every minute, on the minute.
const cronJob = "chaos_every_minute"

// configYAML is the replicas' PUSHFAN_CONFIG: a named audience (the users
// of one zone), one under a frequency cap, a cron job firing every minute, and every webhook event
// to the soak's sink.
func configYAML(hookURL string) string {
	return fmt.Sprintf(`frequency_caps:
  chaos: "%s"

audiences:
  - name: capped_users
    description: the users of UTC (a quarter), under the chaos cap
    frequency_cap: chaos
    sql: |
      SELECT t.id AS `+"`cursor`"+`, t.user_id, t.token
      FROM device_tokens t
      JOIN users u ON u.id = t.user_id
      WHERE t.id > :after
        AND t.invalidated_at IS NULL
        AND u.push_enabled = 1
        AND u.timezone = 'UTC'
      ORDER BY t.id
      LIMIT :limit
  - name: zone_users
    description: the users of one time zone
    params:
      zone: string
    sql: |
      SELECT t.id AS `+"`cursor`"+`, t.user_id, t.token
      FROM device_tokens t
      JOIN users u ON u.id = t.user_id
      WHERE t.id > :after
        AND t.invalidated_at IS NULL
        AND u.push_enabled = 1
        AND u.timezone = :zone
      ORDER BY t.id
      LIMIT :limit

jobs:
  - name: %s
    schedule: "0 * * * * *"
    timezone: UTC
    catchup: 1m
    enabled: true
    audience:
      name: zone_users
      params: {zone: America/New_York}
    message:
      title: "every minute"
      body: "a cron fire"

webhooks:
  - name: chaos
    url: %s
    secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
`, chaosCap, cronJob, hookURL)
}

// The cap of the capped_users audience: at most chaosCapN of its
// broadcasts per user in any chaosCapWindow (a rolling window, counted
// from each reservation).
const (
	chaosCap       = "2/5m"
	chaosCapN      = 2
	chaosCapWindow = 5 * time.Minute
	// cappedTitle marks the capped broadcasts' sends at the emulator.
	cappedTitle = "capped"
)
