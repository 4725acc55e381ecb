package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// SchemaVersion is the schema this build was made for: the highest version
// of the migrations it embeds. Instances write it with their heartbeat, and
// package lease compares it with the schema fence (see RaiseFence).
func SchemaVersion() int64 {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(fmt.Sprintf("reading the embedded migrations: %v", err)) // compiled in: cannot happen
	}
	var v int64
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if n, err := strconv.ParseInt(num, 10, 64); ok && err == nil {
			v = max(v, n)
		}
	}
	return v
}

// RaiseFence raises the schema fence (table schema_fence, migration 00029)
// to version, never lowering it: from then on a release built for an older
// schema makes no transition in package lease (docs/operations.md,
// "Upgrades"). The update waits for the transitions in flight, which hold
// the fence row under a shared lock, so none of them commits after it. On a
// database without the table yet (before migration 00029) there is no
// fence to raise and no instance that reads one: it does nothing.
//
// A fence already at version or above is only read (a plain read, no
// lock): every start of an instance migrates, and a restart of the same
// release must not queue its exclusive lock behind a stalled instance's
// transition (a paused process, a frozen VM), nor every other instance's
// transitions behind that lock (InnoDB queues a shared request behind a
// waiting exclusive one). Only a release that does raise it waits.
func RaiseFence(ctx context.Context, db *sql.DB, version int64) error {
	var fence int64
	err := db.QueryRowContext(ctx, "SELECT version FROM schema_fence WHERE id = 1").Scan(&fence)
	if err == nil && fence >= version {
		return nil
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1146 { // ER_NO_SUCH_TABLE
			return nil
		}
		return fmt.Errorf("read the schema fence: %w", err)
	}
	_, err = db.ExecContext(ctx, `INSERT INTO schema_fence (id, version, raised_at) VALUES (1, ?, UTC_TIMESTAMP(6))
		ON DUPLICATE KEY UPDATE raised_at = IF(VALUES(version) > version, VALUES(raised_at), raised_at), version = GREATEST(version, VALUES(version))`, version)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 { // ER_NO_SUCH_TABLE
		return nil
	}
	if err != nil {
		return fmt.Errorf("raise the schema fence to %d: %w", version, err)
	}
	return nil
}
