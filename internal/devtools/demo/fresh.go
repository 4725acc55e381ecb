package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// ErrNotADemo refuses a fresh start of a database the demo did not make.
var ErrNotADemo = errors.New("not a demo database")

// CheckDemoDatabase says whether the database dsn names may be dropped for
// a demo's fresh start: it does not exist, holds no table, or holds the
// demo's seeded tokens (SeedTokenName: "tok-1-1", never a real FCM
// token). Anything else, a loopback tunnel to a production server or a
// single-host production database, is ErrNotADemo, whatever the address.
func CheckDemoDatabase(ctx context.Context, dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("parse mysql dsn: %w", err)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return fmt.Errorf("mysql connector: %w", err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	var tables int
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&tables)
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == 1049: // unknown database: nothing to drop
		return nil
	case err != nil:
		return fmt.Errorf("look at database %s: %w", cfg.DBName, err)
	case tables == 0:
		return nil
	}
	var seeded bool
	err = db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM device_tokens WHERE token IN (?, ?))",
		SeedTokenName(1, 1, false), SeedTokenName(1, 1, true)).Scan(&seeded)
	if err == nil && seeded {
		return nil
	}
	return fmt.Errorf("database %s at %s holds tables but not the demo's seeded users (no token %q): %w; drop it yourself if it is a demo",
		cfg.DBName, cfg.Addr, SeedTokenName(1, 1, false), ErrNotADemo)
}
