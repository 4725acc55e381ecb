// Package sdnotify speaks systemd's service notification protocol
// (sd_notify(3)) by hand: one datagram per state change on the unix socket
// that NOTIFY_SOCKET names. A unit of Type=notify then counts pushfan as
// started only once it serves (READY=1), sees a deliberate shutdown
// (STOPPING=1), and, with WatchdogSec=, restarts an instance that stops
// answering (WATCHDOG=1 pings). libsystemd is not linked: the binary is
// static, and the protocol is a few lines.
//
// Outside systemd (no NOTIFY_SOCKET: a container, a shell) a Notifier does
// nothing and reports no error, so serve wires one unconditionally.
package sdnotify

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Getenv looks a variable up: os.LookupEnv in production, a map in tests.
type Getenv func(key string) (string, bool)

// Notifier sends state changes to the service manager. The zero of every
// field is "not under systemd"; build one with New.
type Notifier struct {
	addr *net.UnixAddr // nil: no NOTIFY_SOCKET, every call is a no-op
	// watchdog is WATCHDOG_USEC when it is meant for this process: the
	// longest systemd waits between pings. 0: no watchdog.
	watchdog time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	stop context.CancelFunc // the watchdog's, while it runs
	done chan struct{}      // closed when the watchdog's goroutine has ended
}

// New reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID. A socket name
// starting with @ is in the abstract namespace (systemd's own convention).
// The watchdog is for this process only when WATCHDOG_PID is unset or
// names it: a child would otherwise ping for its parent.
func New(getenv Getenv, log *slog.Logger) (*Notifier, error) {
	n := &Notifier{log: log}
	socket, ok := getenv("NOTIFY_SOCKET")
	if !ok || socket == "" {
		return n, nil
	}
	if !strings.HasPrefix(socket, "/") && !strings.HasPrefix(socket, "@") {
		return nil, fmt.Errorf("NOTIFY_SOCKET: %q is neither a path nor an @abstract name", socket)
	}
	name := socket
	if strings.HasPrefix(name, "@") {
		name = "\x00" + name[1:]
	}
	n.addr = &net.UnixAddr{Name: name, Net: "unixgram"}
	usec, ok := getenv("WATCHDOG_USEC")
	if !ok || usec == "" {
		return n, nil
	}
	if pid, ok := getenv("WATCHDOG_PID"); ok && pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return n, nil
	}
	us, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || us == 0 {
		return nil, fmt.Errorf("WATCHDOG_USEC: %q is not a positive number of microseconds", usec)
	}
	n.watchdog = time.Duration(us) * time.Microsecond
	return n, nil
}

// Enabled reports whether a service manager listens.
func (n *Notifier) Enabled() bool { return n.addr != nil }

// Ready says the service is up: migrations applied, parts started, the
// listener accepting.
func (n *Notifier) Ready() error { return n.send("READY=1") }

// Stopping says a shutdown has begun, so that systemd waits for it
// (within TimeoutStopSec) rather than taking the exit for a crash.
func (n *Notifier) Stopping() error { return n.send("STOPPING=1") }

func (n *Notifier) send(state string) error {
	if n.addr == nil {
		return nil
	}
	// A socket per message: notifications are rare (a watchdog ping every
	// few seconds at most), and nothing stays open across a fork or a
	// socket that systemd recreated.
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	return nil
}
