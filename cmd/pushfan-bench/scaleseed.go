package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// zonedDB returns the database <prefix>_<name>_<n>: n tokens, two per
// user, users spread over scaleZones, every one a target. It is seeded
// with MariaDB's sequence engine (10M tokens in a few minutes) when it does
// not hold exactly that, and kept for the next run; the broadcasts of
// earlier runs are cleared. It returns the seconds seeding took (0 when
// the database was reused).
func (b *bench) zonedDB(ctx context.Context, name string, n int) (benchDB, float64, error) {
	db, err := dbFor(b.o.dbPrefix+"_"+name, n)
	if err != nil {
		return db, 0, err
	}
	b.dbs[db.name] = true
	if n%2 != 0 {
		return db, 0, fmt.Errorf("SCALE_N %d: want an even number (two tokens per user)", n)
	}
	var secs float64
	if ok, why := isZonedSeeded(ctx, db); !ok {
		b.logf("seeding %s: %d tokens, two per user, in %d zones (%s)", db.name, n, scaleZoneCount, why)
		t0 := time.Now()
		if err := seedZoned(ctx, b.o.bin, db); err != nil {
			return db, 0, err
		}
		secs = time.Since(t0).Seconds()
		b.logf("seeded %d tokens in %.1f s", n, secs)
	}
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return db, secs, err
	}
	defer conn.Close()
	for _, t := range []string{"broadcast_chunks", "broadcast_errors", "broadcast_failures", "broadcast_variants", "broadcasts", "budget_members", "budget_pauses"} {
		if _, err := conn.ExecContext(ctx, "DELETE FROM "+t); err != nil {
			return db, secs, fmt.Errorf("clearing %s.%s: %w", db.name, t, err)
		}
	}
	return db, secs, nil
}

func isZonedSeeded(ctx context.Context, db benchDB) (bool, string) {
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return false, err.Error()
	}
	defer conn.Close()
	var users, tokens, zoned int64
	if err := conn.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM users WHERE push_enabled = 1),
			(SELECT COUNT(*) FROM device_tokens WHERE invalidated_at IS NULL),
			(SELECT COUNT(DISTINCT timezone) FROM users)`).Scan(&users, &tokens, &zoned); err != nil {
		return false, "not there yet"
	}
	if tokens != int64(db.n) || users != int64(db.n/2) || zoned != scaleZoneCount {
		return false, fmt.Sprintf("holds %d users, %d tokens, %d zones", users, tokens, zoned)
	}
	return true, ""
}

// seedZoned recreates db, migrates it with `pushfan migrate`, and fills it.
func seedZoned(ctx context.Context, bin string, db benchDB) error {
	srv, err := openServer()
	if err != nil {
		return err
	}
	_, err = srv.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+db.name+"`")
	if err == nil {
		_, err = srv.ExecContext(ctx, "CREATE DATABASE `"+db.name+"` CHARACTER SET utf8mb4")
	}
	srv.Close()
	if err != nil {
		return fmt.Errorf("recreating %s: %w", db.name, err)
	}
	cmd := exec.CommandContext(ctx, bin, "migrate")
	cmd.Env = append(os.Environ(), "PUSHFAN_MYSQL_DSN="+db.dsn, "PUSHFAN_LOG_LEVEL=warn",
		"PUSHFAN_FCM_ENDPOINT=http://127.0.0.1:9/v1", "PUSHFAN_FCM_PROJECT_ID="+benchProject)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pushfan migrate: %w\n%s", err, out)
	}
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	zones := scaleZones()
	quoted := make([]string, len(zones))
	for i, z := range zones {
		quoted[i] = "'" + z + "'"
	}
	users := db.n / 2
	for _, q := range []string{
		fmt.Sprintf("INSERT INTO users (id, timezone) SELECT seq, ELT(1 + seq %% %d, %s) FROM seq_1_to_%d", len(zones), strings.Join(quoted, ","), users),
		fmt.Sprintf(`INSERT INTO device_tokens (user_id, token, platform)
			SELECT u.seq, CONCAT('scale-', u.seq, '-', k.seq), 'android' FROM seq_1_to_%d u JOIN seq_0_to_1 k ORDER BY u.seq, k.seq`, users),
		"ANALYZE TABLE users, device_tokens",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("seeding %s: %w", db.name, err)
		}
	}
	return nil
}
