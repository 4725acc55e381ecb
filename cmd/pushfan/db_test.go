package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"pushfan/config"
	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

// retrySignal is a log handler that closes retried at the first "retrying"
// record: the test's signal that start-up met the refused database.
type retrySignal struct {
	once    *sync.Once
	retried chan struct{}
}

func (h retrySignal) Enabled(context.Context, slog.Level) bool { return true }
func (h retrySignal) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "retrying") {
		h.once.Do(func() { close(h.retried) })
	}
	return nil
}
func (h retrySignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h retrySignal) WithGroup(string) slog.Handler      { return h }

// Start-up keeps trying a database that refuses connections (restarting,
// or cut off), and comes up once it is back; it gives up after its wait;
// and a statement error (a bad database name) is not retried at all.
func TestStartupRetriesAnUnreachableDatabase(t *testing.T) {
	db := testdb.New(t)
	dsn, err := mysql.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy := teststack.NewProxy(t, dsn.Addr)
	cfg := config.Defaults()
	cfg.MySQLDSN = proxy.DSN(db.DSN)
	cfg.DB.Timeout = 2 * time.Second

	proxy.Cut()
	sig := retrySignal{once: &sync.Once{}, retried: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		pool, err := openDBWithin(t.Context(), cfg, slog.New(sig), time.Minute)
		if err == nil {
			err = pool.Ping()
			pool.Close()
		}
		done <- err
	}()
	select {
	case <-sig.retried:
	case err := <-done:
		t.Fatalf("start-up ended (%v) while the database refused connections; want it retrying", err)
	case <-time.After(time.Minute):
		t.Fatal("timed out after 1m waiting for start-up to log a retry against the refused database")
	}
	proxy.Restore()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("start-up after the database came back: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("timed out after 1m waiting for start-up to connect once the database was back")
	}

	proxy.Cut()
	_, err = openDBWithin(t.Context(), cfg, slog.New(slog.DiscardHandler), 1500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "attempts") {
		t.Fatalf("start-up against a database down for longer than its wait: %v, want an error after several attempts", err)
	}
	proxy.Restore()

	bad := cfg
	bad.MySQLDSN = strings.Replace(cfg.MySQLDSN, "/"+dsn.DBName, "/no-such-db!", 1)
	_, err = openDBWithin(t.Context(), bad, slog.New(slog.DiscardHandler), time.Minute)
	if err == nil || strings.Contains(err.Error(), "attempts") {
		t.Fatalf("start-up with an invalid database name: %v, want an error at the first attempt", err)
	}
}
