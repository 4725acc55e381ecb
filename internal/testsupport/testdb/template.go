package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-sql-driver/mysql"

	"pushfan/internal/platform/sqldb"
	"pushfan/repository"
)

// A test's database is a copy of a template: a database migrated once per
// version of the migrations (named by their digest) and then copied table
// by table. Migrating takes goose through 30-odd migrations, 2-6 s on this
// machine, and a suite makes hundreds of databases; a copy takes a
// fraction of a second. The copy is the migrated schema exactly: every
// table's own CREATE statement (SHOW CREATE TABLE, indexes and all) and
// every row the migrations and the fence wrote (goose's version table, the
// fence). The migrations make tables only (no views, triggers, routines,
// foreign keys or partitions): TestACopyIsTheMigratedSchema compares a copy
// with a database migrated the slow way, so a migration that adds anything
// else fails there first.

// templatePrefix names the templates: pushfan_tpl_<digest prefix>.
const templatePrefix = "pushfan_tpl_"

// templateReady is the table a template gets last, once migrated: a
// template without it is one whose maker died, and is made again.
const templateReady = "pushfan_template_ready"

// templateName is the template database for this build's migrations.
func templateName() (string, error) {
	d, err := repository.MigrationsDigest()
	if err != nil {
		return "", err
	}
	return templatePrefix + d[:16], nil
}

// ensureTemplate makes the template database on server if it is not
// there yet. Test binaries of several packages run at once (go test runs
// packages in parallel), so a named lock serializes the makers: the first
// one migrates, the others wait and find it ready. Templates of other
// migration digests made more than a day ago (an older checkout's) are
// dropped by the maker; a younger one may be another checkout's whose
// tests run right now (a CI clone beside a working tree), and is kept.
func ensureTemplate(ctx context.Context, server, name string, log *slog.Logger) error {
	db, err := sql.Open("mysql", server)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx) // the named lock belongs to one session
	if err != nil {
		return err
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 120)", name).Scan(&got); err != nil {
		return fmt.Errorf("lock %s: %w", name, err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("lock %s: not granted in 120 s", name)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", name) //nolint:errcheck // the session's end releases it too
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
		name, templateReady).Scan(&n); err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	if err := dropOtherTemplates(ctx, conn, name); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		return err
	}
	dsn, err := withDB(server, name)
	if err != nil {
		return err
	}
	if err := sqldb.EnsureDatabase(ctx, dsn); err != nil {
		return err
	}
	pool, err := sqldb.Open(ctx, dsn, 4, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := repository.Migrate(ctx, pool.DB, log); err != nil {
		return fmt.Errorf("migrate the template %s: %w", name, err)
	}
	_, err = pool.ExecContext(ctx, "CREATE TABLE `"+templateReady+"` (id INT PRIMARY KEY)")
	return err
}

// withDB is the server's DSN naming database name.
func withDB(server, name string) (string, error) {
	cfg, err := mysql.ParseDSN(server)
	if err != nil {
		return "", err
	}
	cfg.DBName = name
	return cfg.FormatDSN(), nil
}

// dropOtherTemplates drops the templates of other migration digests that
// were made ready more than templateKeep ago.
func dropOtherTemplates(ctx context.Context, conn *sql.Conn, keep string) error {
	rows, err := conn.QueryContext(ctx, `SELECT TABLE_SCHEMA FROM information_schema.TABLES
		WHERE TABLE_NAME = ? AND TABLE_SCHEMA LIKE ? AND TABLE_SCHEMA <> ? AND CREATE_TIME < NOW() - INTERVAL ? SECOND`,
		templateReady, templatePrefix+"%", keep, int64(templateKeep/time.Second))
	if err != nil {
		return err
	}
	var old []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return err
		}
		old = append(old, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range old {
		if _, err := conn.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+s+"`"); err != nil {
			return err
		}
	}
	return nil
}

// templateKeep is how long another digest's template is kept.
const templateKeep = 24 * time.Hour

// copyTemplate makes database name (created, empty) a copy of the
// template: each table's CREATE statement, then its rows.
func copyTemplate(ctx context.Context, server, template, name string) error {
	db, err := sql.Open("mysql", server)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx) // USE holds for this session only
	if err != nil {
		return err
	}
	defer conn.Close()
	tables, err := templateTables(ctx, conn, template)
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "USE `"+name+"`"); err != nil {
		return err
	}
	for _, t := range tables {
		var tn, create string
		if err := conn.QueryRowContext(ctx, "SHOW CREATE TABLE `"+template+"`.`"+t+"`").Scan(&tn, &create); err != nil {
			return fmt.Errorf("read %s.%s: %w", template, t, err)
		}
		if _, err := conn.ExecContext(ctx, create); err != nil {
			return fmt.Errorf("create %s.%s: %w", name, t, err)
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO `"+t+"` SELECT * FROM `"+template+"`.`"+t+"`"); err != nil {
			return fmt.Errorf("copy %s.%s: %w", name, t, err)
		}
	}
	return nil
}

// templateTables lists the template's tables but its ready mark.
func templateTables(ctx context.Context, conn *sql.Conn, template string) ([]string, error) {
	rows, err := conn.QueryContext(ctx, `SELECT TABLE_NAME FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' AND TABLE_NAME <> ? ORDER BY TABLE_NAME`, template, templateReady)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("template %s has no tables", template)
	}
	return out, nil
}
