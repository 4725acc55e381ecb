package sdnotify

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// manager is the service manager's end: a real unixgram socket.
type manager struct {
	t    *testing.T
	conn *net.UnixConn
	path string
}

func listen(t *testing.T) *manager {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &manager{t: t, conn: conn, path: path}
}

// next returns the next datagram, failing the test after within.
func (m *manager) next(what string, within time.Duration) string {
	m.t.Helper()
	buf := make([]byte, 4096)
	if err := m.conn.SetReadDeadline(time.Now().Add(within)); err != nil {
		m.t.Fatal(err)
	}
	n, err := m.conn.Read(buf)
	if err != nil {
		m.t.Fatalf("waiting %v for %s: %v", within, what, err)
	}
	return string(buf[:n])
}

// none asserts that nothing arrives for d.
func (m *manager) none(d time.Duration) {
	m.t.Helper()
	buf := make([]byte, 4096)
	if err := m.conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		m.t.Fatal(err)
	}
	if n, err := m.conn.Read(buf); err == nil {
		m.t.Fatalf("got %q, want nothing", buf[:n])
	}
}

func env(m map[string]string) Getenv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestReadyAndStopping(t *testing.T) {
	m := listen(t)
	n, err := New(env(map[string]string{"NOTIFY_SOCKET": m.path}), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if !n.Enabled() || n.WatchdogInterval() != 0 {
		t.Fatalf("enabled %v, watchdog %v; want enabled without a watchdog", n.Enabled(), n.WatchdogInterval())
	}
	if err := n.Ready(); err != nil {
		t.Fatal(err)
	}
	if got := m.next("READY=1", 5*time.Second); got != "READY=1" {
		t.Fatalf("got %q, want READY=1", got)
	}
	if err := n.Stopping(); err != nil {
		t.Fatal(err)
	}
	if got := m.next("STOPPING=1", 5*time.Second); got != "STOPPING=1" {
		t.Fatalf("got %q, want STOPPING=1", got)
	}
	n.StartWatchdog(t.Context(), nil) // no WATCHDOG_USEC: nothing runs
	m.none(100 * time.Millisecond)
	n.StopWatchdog()
}

func TestAbstractSocket(t *testing.T) {
	name := "pushfan-sdnotify-test-" + strconv.Itoa(os.Getpid())
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: "\x00" + name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	m := &manager{t: t, conn: conn}
	n, err := New(env(map[string]string{"NOTIFY_SOCKET": "@" + name}), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Ready(); err != nil {
		t.Fatal(err)
	}
	if got := m.next("READY=1 on the abstract socket", 5*time.Second); got != "READY=1" {
		t.Fatalf("got %q", got)
	}
}

// Without NOTIFY_SOCKET (not under systemd) every call is a quiet no-op.
func TestOutsideSystemd(t *testing.T) {
	n, err := New(env(nil), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if n.Enabled() {
		t.Fatal("enabled without NOTIFY_SOCKET")
	}
	if err := errors.Join(n.Ready(), n.Stopping()); err != nil {
		t.Fatal(err)
	}
	n.StartWatchdog(t.Context(), nil)
	n.StopWatchdog()
}

func TestWatchdogPingsAtHalfTheTimeout(t *testing.T) {
	m := listen(t)
	n, err := New(env(map[string]string{"NOTIFY_SOCKET": m.path, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": strconv.Itoa(os.Getpid())}), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if got := n.WatchdogInterval(); got != 100*time.Millisecond {
		t.Fatalf("interval %v, want half of WATCHDOG_USEC=200000: 100ms", got)
	}
	var alive atomic.Bool
	alive.Store(true)
	n.StartWatchdog(t.Context(), func(context.Context) error {
		if !alive.Load() {
			return errors.New("the server does not answer")
		}
		return nil
	})
	n.StartWatchdog(t.Context(), nil) // a second start changes nothing
	start := time.Now()
	for i := range 3 {
		if got := m.next("WATCHDOG=1 ping "+strconv.Itoa(i+1), 5*time.Second); got != "WATCHDOG=1" {
			t.Fatalf("got %q, want WATCHDOG=1", got)
		}
	}
	// The first ping goes at once, the next two an interval apart each.
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("3 pings in %v: faster than one per 100ms interval", took)
	}
	// Not alive: no pings, so systemd restarts the instance.
	alive.Store(false)
	_ = drain(m, 150*time.Millisecond) // a ping in flight when it changed
	m.none(350 * time.Millisecond)
	alive.Store(true)
	if got := m.next("WATCHDOG=1 once alive again", 5*time.Second); got != "WATCHDOG=1" {
		t.Fatalf("got %q", got)
	}
	n.StopWatchdog()
	_ = drain(m, 50*time.Millisecond)
	m.none(300 * time.Millisecond)
	n.StopWatchdog() // twice is safe
}

// drain reads what arrives within d.
func drain(m *manager, d time.Duration) int {
	buf := make([]byte, 4096)
	count := 0
	deadline := time.Now().Add(d)
	for {
		if err := m.conn.SetReadDeadline(deadline); err != nil {
			return count
		}
		if _, err := m.conn.Read(buf); err != nil {
			return count
		}
		count++
	}
}

// The watchdog is another process's (WATCHDOG_PID names it): no pings.
func TestWatchdogForAnotherProcess(t *testing.T) {
	m := listen(t)
	n, err := New(env(map[string]string{"NOTIFY_SOCKET": m.path, "WATCHDOG_USEC": "100000", "WATCHDOG_PID": "1"}), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if n.WatchdogInterval() != 0 {
		t.Fatalf("watchdog %v for WATCHDOG_PID=1", n.WatchdogInterval())
	}
	n.StartWatchdog(t.Context(), nil)
	m.none(200 * time.Millisecond)
}

func TestBadEnvironment(t *testing.T) {
	for _, e := range []map[string]string{
		{"NOTIFY_SOCKET": "relative/path"},
		{"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "soon"},
		{"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "0"},
	} {
		if _, err := New(env(e), quiet()); err == nil {
			t.Errorf("New(%v) took it", e)
		}
	}
}
