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

// The partner app's users: ids partnerBase+1 … partnerBase+partnerUsers,
// apart from the default app's 1 … cfg.users (a user id belongs to one
// app's users here, as with apps that number their users themselves).
const (
	partnerBase  = 100_000
	partnerUsers = 4000
	// Every partnerEvery-th default user's first token is followed, in
	// token id, by a partner user's: the apps' tokens interleave in the
	// one device_tokens table, so every chunk of either app's "all" walk
	// passes over the other app's rows.
	partnerEvery = 5
)

// Every partnerDeadEvery-th partner user's first token is answered
// UNREGISTERED; every partnerTwoEvery-th has a second device.
const (
	partnerDeadEvery = 50
	partnerTwoEvery  = 4
)

// seed inserts the default app's users 1..n with one token each: "c-<id>",
// except every 100th user's, which the emulator answers UNREGISTERED
// (failures to count, tokens to invalidate, something for a resend to
// cover), and a second device "c2-<id>" for every 10th. The partner app's
// users and tokens ("p-…", "p2-…", "unregistered-p-…", app 'partner') are
// inserted in the same statements, their token ids interleaved with the
// default app's: partner user k's token comes after default user
// k*partnerEvery's.
func (s *stack) seed() {
	n := s.cfg.users
	if partnerUsers*partnerEvery > n {
		s.t.Fatalf("seeding: %d partner users interleaved every %d default users need %d default users, have %d", partnerUsers, partnerEvery, partnerUsers*partnerEvery, n)
	}
	quoted := make([]string, len(zones))
	for i, z := range zones {
		quoted[i] = "'" + z + "'"
	}
	zone := fmt.Sprintf("ELT(1 + seq %% %d, %s)", len(zones), strings.Join(quoted, ","))
	// k is a partner user's number, 1..partnerUsers; its token sorts
	// (ord) right after default user k*partnerEvery's.
	partner := fmt.Sprintf("SELECT seq AS k, %d + seq AS uid, 2 * %d * seq + 1 AS ord FROM seq_1_to_%d", partnerBase, partnerEvery, partnerUsers)
	for _, q := range []string{
		fmt.Sprintf("INSERT INTO users (id, timezone) SELECT seq, %s FROM seq_1_to_%d", zone, n),
		fmt.Sprintf("INSERT INTO users (id, timezone) SELECT %d + seq, %s FROM seq_1_to_%d", partnerBase, zone, partnerUsers),
		fmt.Sprintf(`INSERT INTO device_tokens (app, user_id, token, platform)
			SELECT app, uid, token, platform FROM (
				SELECT 'default' AS app, seq AS uid, IF(seq %% 100 = 0, CONCAT('unregistered-c-', seq), CONCAT('c-', seq)) AS token, 'android' AS platform, 2 * seq AS ord FROM seq_1_to_%d
				UNION ALL
				SELECT 'partner', uid, IF(k %% %d = 0, CONCAT('unregistered-p-', uid), CONCAT('p-', uid)), 'android', ord FROM (%s) p
			) x ORDER BY ord`, n, partnerDeadEvery, partner),
		// Every 10th default user has a second device, and every 4th
		// partner user: a frequency cap's answer is the user's, so both
		// get the same one, though their token ids are far apart (in
		// different chunks).
		fmt.Sprintf(`INSERT INTO device_tokens (app, user_id, token, platform)
			SELECT app, uid, token, platform FROM (
				SELECT 'default' AS app, seq AS uid, CONCAT('c2-', seq) AS token, 'ios' AS platform, 2 * seq AS ord FROM seq_1_to_%d WHERE seq %% 10 = 0
				UNION ALL
				SELECT 'partner', uid, CONCAT('p2-', uid), 'ios', ord FROM (%s) p WHERE k %% %d = 0
			) x ORDER BY ord`, n, partner, partnerTwoEvery),
		"ANALYZE TABLE users, device_tokens",
	} {
		if _, err := s.db.Exec(q); err != nil {
			s.t.Fatalf("seeding: %v", err)
		}
	}
	if err := s.checkSeed(); err != nil {
		s.t.Fatal(err)
	}
}

// checkSeed reads back what seed meant to make: the apps' token counts,
// and their interleaving (a partner token between two default ones).
func (s *stack) checkSeed() error {
	want := map[string]int{
		defaultApp: s.cfg.users + s.cfg.users/10,
		partnerApp: partnerUsers + partnerUsers/partnerTwoEvery,
	}
	for app, n := range want {
		var got int
		if err := s.db.QueryRow("SELECT COUNT(*) FROM device_tokens WHERE app = ?", app).Scan(&got); err != nil {
			return fmt.Errorf("seeding: counting %s's tokens: %w", app, err)
		}
		if got != n {
			return fmt.Errorf("seeding: %d tokens of app %s, want %d", got, app, n)
		}
	}
	// Interleaved: default tokens lie between the first and the last
	// partner token, and partner tokens between the first and the last
	// default one.
	var between int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM device_tokens d
		WHERE d.app = 'default' AND d.id > (SELECT MIN(id) FROM device_tokens WHERE app = 'partner')
		AND d.id < (SELECT MAX(id) FROM device_tokens WHERE app = 'partner')`).Scan(&between); err != nil {
		return fmt.Errorf("seeding: reading the tokens' ids: %w", err)
	}
	if between < want[defaultApp]/2 {
		return fmt.Errorf("seeding: only %d default tokens lie between the partner tokens' ids, want them interleaved (at least %d)", between, want[defaultApp]/2)
	}
	return nil
}

// cronJob fires every minute, on the minute.
const cronJob = "chaos_every_minute"

// configYAML is the replicas' PUSHFAN_CONFIG: the apps, each with its own
// emulator and rate limit; two named audiences of the default app (the
// users of one zone, and those of UTC under a frequency cap), a cron job of
// it firing every minute, and every webhook event to the soak's sink.
// The audiences' SQL reads the shared device_tokens table, so it keeps its
// app's rows itself (pushfan adds the app condition to the audiences it
// builds, not to an operator's SQL).
func (s *stack) configYAML(hookURL string) string {
	var apps strings.Builder
	for _, e := range s.emus {
		fmt.Fprintf(&apps, "  - name: %s\n    project_id: %s\n    endpoint: %s\n    rate_limit: %g\n", e.app.name, e.app.project, e.url, e.app.rate)
	}
	return fmt.Sprintf(`apps:
%s
frequency_caps:
  chaos: "%s"

audiences:
  - name: capped_users
    app: default
    description: the users of UTC (a quarter), under the chaos cap
    frequency_cap: chaos
    sql: |
      SELECT t.id AS `+"`cursor`"+`, t.user_id, t.token
      FROM device_tokens t
      JOIN users u ON u.id = t.user_id
      WHERE t.id > :after
        AND t.app = 'default'
        AND t.invalidated_at IS NULL
        AND u.push_enabled = 1
        AND u.timezone = 'UTC'
      ORDER BY t.id
      LIMIT :limit
  - name: zone_users
    app: default
    description: the users of one time zone
    params:
      zone: string
    sql: |
      SELECT t.id AS `+"`cursor`"+`, t.user_id, t.token
      FROM device_tokens t
      JOIN users u ON u.id = t.user_id
      WHERE t.id > :after
        AND t.app = 'default'
        AND t.invalidated_at IS NULL
        AND u.push_enabled = 1
        AND u.timezone = :zone
      ORDER BY t.id
      LIMIT :limit

jobs:
  - name: %s
    app: default
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
`, apps.String(), chaosCap, cronJob, hookURL)
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
