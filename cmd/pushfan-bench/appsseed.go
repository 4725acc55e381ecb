package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
)

// ensureAppsSeeded makes sure db holds exactly the tokens of the bench's
// apps, ns[i] valid tokens of benchApps[i] each of its own push-enabled
// user: it seeds them with `pushfan seed` when the database does not hold
// one token for each of sum(ns) users, migrates it (a database seeded by
// a release before apps), and gives the tokens their apps. Earlier runs'
// broadcasts are cleared (ensureSeeded).
func ensureAppsSeeded(ctx context.Context, bin string, db benchDB, ns []int, logf func(string, ...any)) error {
	if err := ensureSeeded(ctx, bin, db, logf); err != nil {
		return err
	}
	if ok, _ := appsSeeded(ctx, db, ns); ok {
		return nil
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
	logf("giving %s's tokens the apps %v: %v", db.name, benchApps, ns)
	lo := 0
	for i, app := range benchApps {
		if _, err := conn.ExecContext(ctx, "UPDATE device_tokens SET app = ? WHERE user_id > ? AND user_id <= ?", app, lo, lo+ns[i]); err != nil {
			return fmt.Errorf("giving tokens the app %s: %w", app, err)
		}
		lo += ns[i]
	}
	if ok, why := appsSeeded(ctx, db, ns); !ok {
		return fmt.Errorf("%s after giving the tokens their apps: %s", db.name, why)
	}
	return nil
}

func appsSeeded(ctx context.Context, db benchDB, ns []int) (bool, string) {
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return false, err.Error()
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, "SELECT app, COUNT(*) FROM device_tokens WHERE invalidated_at IS NULL GROUP BY app")
	if err != nil {
		return false, "not there yet"
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var app string
		var n int
		if err := rows.Scan(&app, &n); err != nil {
			return false, err.Error()
		}
		got[app] = n
	}
	if err := rows.Err(); err != nil {
		return false, err.Error()
	}
	want := map[string]int{}
	for i, app := range benchApps {
		want[app] = ns[i]
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return false, fmt.Sprintf("holds valid tokens by app %v", got)
	}
	return true, ""
}
