package main

import (
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"pushfan/fcmemu"
	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

// pushfan serve under a service manager: the manager's end of
// NOTIFY_SOCKET is a real unixgram socket here, as systemd's would be.
// It hears READY=1, watchdog pings at half WATCHDOG_USEC, and STOPPING=1
// when SIGTERM starts the shutdown.
func TestServeNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	tdb := testdb.New(t)
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	emuSrv := httptest.NewServer(emu.Handler())
	t.Cleanup(emuSrv.Close)
	p := teststack.StartServe(t, binary, "serve", append(os.Environ(),
		"PUSHFAN_MYSQL_DSN="+tdb.DSN,
		"PUSHFAN_FCM_ENDPOINT="+emuSrv.URL+"/v1",
		"PUSHFAN_FCM_PROJECT_ID=sdnotify",
		"PUSHFAN_LOG_FORMAT=text",
		"PUSHFAN_CONFIG=",
		"NOTIFY_SOCKET="+sock,
		"WATCHDOG_USEC=400000",
	))
	next := func(what string) string {
		t.Helper()
		buf := make([]byte, 4096)
		if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("waiting 20s for %s on NOTIFY_SOCKET: %v", what, err)
		}
		return string(buf[:n])
	}
	if got := next("READY=1"); got != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", got)
	}
	for i := range 2 {
		if got := next("a watchdog ping"); got != "WATCHDOG=1" {
			t.Fatalf("notification %d after READY=1: %q, want WATCHDOG=1", i+1, got)
		}
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		got := next("STOPPING=1 after SIGTERM")
		if got == "STOPPING=1" {
			break
		}
		if got != "WATCHDOG=1" {
			t.Fatalf("after SIGTERM: %q, want STOPPING=1", got)
		}
	}
	p.WaitExit(t, "SIGTERM")
	if p.ExitErr != nil {
		t.Errorf("serve exited with %v after SIGTERM", p.ExitErr)
	}
}
