package chaos

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"pushfan/internal/testsupport/teststack"
)

// privateDB is a MariaDB server of the soak's own (datadir, port and
// socket under a temporary directory), so that the "DB restart" fault
// stops and starts a real server: SIGTERM (a clean shutdown) or SIGKILL
// (a crash, with InnoDB's recovery at the next start). The replicas reach
// it through the fault proxy, the checker directly.
type privateDB struct {
	server  string // mariadbd
	dir     string // datadir, socket, pid file and error log live here
	port    int
	asRoot  bool
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool // between a stop and the next start: the checker pauses
}

// mariadbBinaries finds the server and its installer; "" when absent.
func mariadbBinaries() (server, install string) {
	for _, s := range []string{"/usr/sbin/mariadbd", "/usr/bin/mariadbd"} {
		if _, err := os.Stat(s); err == nil {
			server = s
			break
		}
	}
	for _, s := range []string{"mariadb-install-db", "mysql_install_db"} {
		if p, err := exec.LookPath(s); err == nil {
			install = p
			break
		}
	}
	if server == "" || install == "" {
		return "", ""
	}
	return server, install
}

// startPrivateDB initialises a datadir and starts a server on a free
// port; nil, with the reason, when the binaries are absent.
func startPrivateDB(t *testing.T) (*privateDB, string) {
	t.Helper()
	server, install := mariadbBinaries()
	if server == "" {
		return nil, "mariadbd or mariadb-install-db not found"
	}
	dir, err := os.MkdirTemp("", "pushfan-chaos-mariadb-")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p := &privateDB{server: server, dir: dir, port: port, asRoot: os.Geteuid() == 0}
	args := []string{"--no-defaults", "--datadir=" + p.datadir(), "--auth-root-authentication-method=normal", "--skip-test-db"}
	if p.asRoot {
		args = append(args, "--user=root")
	}
	if out, err := exec.Command(install, args...).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		p.stop(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("the private MariaDB's error log is %s", filepath.Join(dir, "error.log"))
			return
		}
		os.RemoveAll(dir)
	})
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	return p, ""
}

func (p *privateDB) datadir() string { return filepath.Join(p.dir, "data") }

// DSN is the server's DSN (no database: testdb makes one per test).
func (p *privateDB) DSN() string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/?parseTime=true", p.port)
}

// start runs the server and waits until it accepts connections.
func (p *privateDB) start() error {
	args := []string{"--no-defaults", "--datadir=" + p.datadir(),
		"--port=" + strconv.Itoa(p.port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(p.dir, "mysqld.sock"), "--pid-file=" + filepath.Join(p.dir, "mysqld.pid"),
		"--log-error=" + filepath.Join(p.dir, "error.log"),
		// Root without a password over TCP, as on the machine's server.
		"--skip-grant-tables", "--skip-name-resolve",
		// Three replicas at 40 connections each, the checker and the load.
		"--max-connections=500"}
	if p.asRoot {
		args = append(args, "--user=root")
	}
	cmd := exec.Command(p.server, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting mariadbd: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.port), time.Second)
		if err == nil {
			c.Close()
			p.mu.Lock()
			p.stopped = false
			p.mu.Unlock()
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(p.dir, "error.log"))
			return fmt.Errorf("mariadbd exited at start-up: %s", teststack.Tail(string(log), 20))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("timed out after 1m waiting for the private mariadbd to accept connections")
		}
	}
}

// stop sends sig (SIGTERM: a clean shutdown; SIGKILL: a crash) and waits
// for the server to exit.
func (p *privateDB) stop(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.stopped = true
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
		return nil
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("mariadbd did not exit within 2m of %v", sig)
	}
}

// down reports whether the server is stopped (between a stop and the end
// of the next start).
func (p *privateDB) down() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}
