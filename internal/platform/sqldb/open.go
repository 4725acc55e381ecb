package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

const (
	// defaultMaxOpen is used when Open is given a non-positive pool size.
	defaultMaxOpen = 16
	// connMaxLifetime recycles connections so that a failover or a proxy's
	// idle cut never leaves us holding only dead connections.
	connMaxLifetime = 5 * time.Minute
)

// Open connects to MySQL/MariaDB, applying the settings this package relies
// on whatever the DSN says:
//
//   - parseTime=true and loc=UTC, so DATETIME columns scan into time.Time;
//   - time_zone='+00:00' on every session, so CURRENT_TIMESTAMP defaults and
//     NOW() agree with the UTC times we write;
//   - interpolateParams=true (unless the DSN picks its own collation/charset,
//     where interpolation may be unsafe): one round trip per query instead of
//     prepare/execute/close, and no 65,535-placeholder cap on big IN lists;
//   - time values truncated to microseconds, matching DATETIME(6);
//   - on MariaDB, idle_transaction_timeout (idleTransactionTimeout) on
//     every session, so a stalled process's open transaction cannot hold
//     its row locks for longer.
//
// The pool gets maxOpen connections (16 if maxOpen <= 0), as many idle ones
// (so bursts don't churn connections) and a 5 minute lifetime. Open pings the
// server within ctx before returning.
func Open(ctx context.Context, dsn string, maxOpen int, log *slog.Logger) (*sqlx.DB, error) {
	return open(ctx, dsn, maxOpen, log, idleTransactionTimeout)
}

// idleTransactionTimeout is how long MariaDB lets one of our transactions
// sit idle between two statements before it ends the session, rolling the
// transaction back and freeing its locks. Every transaction here runs its
// statements back to back, so only a stalled process gets near it: a VM
// frozen or a SIGSTOP in the middle of a checkpoint. Without it, the row
// locks that transaction holds block every other instance (a cancel of the
// broadcast, a claim of its chunk) until the process runs again or its
// connection drops, which can be hours; with it, for 30 s at most. The
// stalled process finds its connection gone when it runs again, and its
// retry is fenced like any late holder's. MySQL has no such setting (its
// wait_timeout ends the session, idle in a transaction or not).
const idleTransactionTimeout = 30 * time.Second

// open is Open with the idle transaction timeout given (whole seconds; 0:
// none).
func open(ctx context.Context, dsn string, maxOpen int, log *slog.Logger, idleTx time.Duration) (*sqlx.DB, error) {
	log = OrDiscard(log)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	if cfg.Collation == "" && !strings.Contains(dsn, "charset=") {
		cfg.InterpolateParams = true
	}
	cfg.Logger = driverLogger{log: log}
	if err := cfg.Apply(mysql.TimeTruncate(time.Microsecond)); err != nil {
		return nil, fmt.Errorf("configure mysql driver: %w", err)
	}
	if maxOpen <= 0 {
		maxOpen = defaultMaxOpen
	}
	db, err := pool(ctx, cfg, maxOpen)
	if err != nil {
		return nil, err
	}
	// The setting is MariaDB's: a MySQL server refuses a session that
	// sets it. So ask the server first, then open the pool again with it.
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("reading the server's version at %s/%s: %w", cfg.Addr, cfg.DBName, err)
	}
	if idleTx >= time.Second && strings.Contains(version, "MariaDB") {
		_ = db.Close()
		cfg.Params["idle_transaction_timeout"] = strconv.Itoa(int(idleTx / time.Second))
		if db, err = pool(ctx, cfg, maxOpen); err != nil {
			return nil, err
		}
	}
	log.Debug("mysql connected", "addr", cfg.Addr, "db", cfg.DBName, "max_open", maxOpen, "version", version)
	return db, nil
}

// pool opens a pool of maxOpen connections by cfg and pings the server.
func pool(ctx context.Context, cfg *mysql.Config, maxOpen int) (*sqlx.DB, error) {
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql connector: %w", err)
	}
	db := sqlx.NewDb(sql.OpenDB(connector), "mysql")
	db.SetMaxOpenConns(maxOpen)
	db.SetMaxIdleConns(maxOpen)
	db.SetConnMaxLifetime(connMaxLifetime)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("ping mysql at %s/%s: %w", cfg.Addr, cfg.DBName, err)
	}
	return db, nil
}

// EnsureDatabase creates the database named in dsn if it does not exist yet,
// with utf8mb4 as its default character set. It connects to the server without
// selecting a database, since the one we want may not exist.
func EnsureDatabase(ctx context.Context, dsn string) error {
	return onServer(ctx, dsn, func(db *sql.DB, name, addr string) error {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"` CHARACTER SET utf8mb4"); err != nil {
			return fmt.Errorf("create database %s at %s: %w", name, addr, err)
		}
		return nil
	})
}

// onServer calls fn with a connection to dsn's server with no database
// selected (the one named may not exist) and that database's name, checked
// to be safe inside backquotes in DDL, which cannot take placeholders: a
// conservative alphabet rather than escaping.
func onServer(ctx context.Context, dsn string, fn func(db *sql.DB, name, addr string) error) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("parse mysql dsn: %w", err)
	}
	name := cfg.DBName
	if err := validateDatabaseName(name); err != nil {
		return err
	}
	cfg.DBName = ""
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return fmt.Errorf("mysql connector: %w", err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	return fn(db, name, cfg.Addr)
}

func validateDatabaseName(name string) error {
	if name == "" {
		return errors.New("mysql dsn names no database")
	}
	if len(name) > 64 {
		return fmt.Errorf("database name %q is longer than 64 characters", name)
	}
	for _, r := range name {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return fmt.Errorf("database name %q: only letters, digits and _ are allowed", name)
		}
	}
	return nil
}

// driverLogger routes go-sql-driver's own messages (e.g. "unexpected EOF" on
// a connection the server closed) to our logger instead of the stdlib one.
type driverLogger struct{ log *slog.Logger }

func (l driverLogger) Print(v ...any) {
	l.log.Warn("mysql driver", "msg", strings.TrimSpace(fmt.Sprint(v...)))
}

// DropLocalDatabase drops the database named in dsn, for a demo's fresh
// start. It refuses any server but one on this machine (a loopback address
// or a socket): a demo's reset must never reach a shared database, whatever
// the environment says.
func DropLocalDatabase(ctx context.Context, dsn string) error {
	if err := RequireLocal(dsn); err != nil {
		return err
	}
	return onServer(ctx, dsn, func(db *sql.DB, name, addr string) error {
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			return fmt.Errorf("drop database %s at %s: %w", name, addr, err)
		}
		return nil
	})
}

// RequireLocal refuses a DSN of a server not on this machine (a loopback
// address or a socket), before anything connects to it.
func RequireLocal(dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("parse mysql dsn: %w", err)
	}
	if !isLocal(cfg.Net, cfg.Addr) {
		return fmt.Errorf("refusing to drop database %q at %s: only a database on this machine (127.0.0.1, ::1, localhost or a socket) is reset", cfg.DBName, cfg.Addr)
	}
	return nil
}

func isLocal(network, addr string) bool {
	if network == "unix" {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
