package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/go-sql-driver/mysql"
)

// benchDB is one seeded database: N users with one valid token each.
type benchDB struct {
	name string
	dsn  string // for pushfan (PUSHFAN_MYSQL_DSN)
	n    int
}

// serverDSN is the MariaDB server without a database.
func serverDSN() string {
	if v := os.Getenv("PUSHFAN_BENCH_MYSQL_DSN"); v != "" {
		return v
	}
	return "root@tcp(127.0.0.1:3306)/?parseTime=true"
}

func dbFor(prefix string, n int) (benchDB, error) {
	cfg, err := mysql.ParseDSN(serverDSN())
	if err != nil {
		return benchDB{}, fmt.Errorf("PUSHFAN_BENCH_MYSQL_DSN: %w", err)
	}
	cfg.DBName = fmt.Sprintf("%s_%d", prefix, n)
	cfg.ParseTime = true
	return benchDB{name: cfg.DBName, dsn: cfg.FormatDSN(), n: n}, nil
}

func openServer() (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(serverDSN())
	if err != nil {
		return nil, err
	}
	cfg.DBName = ""
	return sql.Open("mysql", cfg.FormatDSN())
}

// ensureSeeded makes sure db holds exactly N users with push enabled and N
// valid tokens, seeding it with `pushfan seed` when it does not, and clears
// the broadcasts of earlier runs (an interrupted run's pending chunks would
// otherwise be resumed by the next serve and skew its figures).
func ensureSeeded(ctx context.Context, bin string, db benchDB, logf func(string, ...any)) error {
	if ok, why := isSeeded(ctx, db); !ok {
		logf("seeding %s with %d users, one token each (%s)", db.name, db.n, why)
		srv, err := openServer()
		if err != nil {
			return err
		}
		_, err = srv.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+db.name+"`")
		srv.Close()
		if err != nil {
			return fmt.Errorf("dropping %s: %w", db.name, err)
		}
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, bin, "seed", "--users", fmt.Sprint(db.n), "--tokens-per-user", "1",
			"--disabled-every", "0", "--invalidated-every", "0", "--dead-every", "0")
		// seed sends nothing, but the configuration must be valid: name an
		// (unused) emulator endpoint rather than real FCM.
		cmd.Env = append(os.Environ(), "PUSHFAN_MYSQL_DSN="+db.dsn, "PUSHFAN_LOG_LEVEL=warn",
			"PUSHFAN_FCM_ENDPOINT=http://127.0.0.1:9/v1", "PUSHFAN_FCM_PROJECT_ID="+benchProject)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("pushfan seed: %w\n%s", err, out)
		}
		logf("seeded %d tokens in %.1fs", db.n, time.Since(t0).Seconds())
		if ok, why := isSeeded(ctx, db); !ok {
			return fmt.Errorf("%s after seeding: %s", db.name, why)
		}
	}
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, t := range []string{"broadcast_chunks", "broadcast_errors", "broadcast_failures", "broadcasts"} {
		if _, err := conn.ExecContext(ctx, "DELETE FROM "+t); err != nil {
			return fmt.Errorf("clearing %s.%s: %w", db.name, t, err)
		}
	}
	return nil
}

func isSeeded(ctx context.Context, db benchDB) (bool, string) {
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return false, err.Error()
	}
	defer conn.Close()
	var users, tokens, valid int64
	err = conn.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM users WHERE push_enabled = 1),
		(SELECT COUNT(*) FROM device_tokens),
		(SELECT COUNT(*) FROM device_tokens WHERE invalidated_at IS NULL)`).Scan(&users, &tokens, &valid)
	if err != nil {
		return false, "not there yet"
	}
	if users != int64(db.n) || tokens != int64(db.n) || valid != int64(db.n) {
		return false, fmt.Sprintf("holds %d enabled users, %d tokens, %d valid", users, tokens, valid)
	}
	return true, ""
}

// loadTokens returns the first n tokens of db in id order (the baselines
// send to the same tokens pushfan does).
func loadTokens(ctx context.Context, db benchDB, n int) ([]string, error) {
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, "SELECT token FROM device_tokens WHERE invalidated_at IS NULL ORDER BY id LIMIT ?", n)
	if err != nil {
		return nil, fmt.Errorf("loading tokens: %w", err)
	}
	defer rows.Close()
	out := make([]string, 0, n)
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func dropDB(ctx context.Context, name string) error {
	srv, err := openServer()
	if err != nil {
		return err
	}
	defer srv.Close()
	_, err = srv.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
	return err
}
