package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"pushfan/engagement"
	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

// adminToken is the one admin token of the soak's replicas.
const adminToken = "chaos-admin-token-0123456789"

// stack is the soak's world: the database (read directly by the checker,
// never through the proxy), the proxy the replicas go through, an
// emulator per app with its arrivals log, the webhook sink and the
// replicas.
type stack struct {
	t     *testing.T
	log   *slog.Logger
	cfg   runConfig
	db    *sqlx.DB
	proxy *teststack.Proxy
	// emus are the apps' emulators, in cfg.apps's order (the default
	// app's first).
	emus   []*emulator
	sink   *hookSink
	env    []string
	dir    string
	reps   []*replica
	faults *faultLog
	// pdb is the soak's own MariaDB, which the "DB restart" fault really
	// stops and starts; nil where its binaries are absent (the fault is
	// then simulated by the proxy refusing connections: noSQLServer says
	// why).
	pdb         *privateDB
	noSQLServer string
	// probe measures this process's own stalls, which move the arrival
	// instants its emulators stamp.
	probe *stallProbe
}

// replica is one `pushfan serve` under a pinned instance id; it is
// replaced by a new process after a kill -9.
type replica struct {
	name string
	mu   sync.Mutex
	proc *process
	// down: killed and not yet restarted; paused: SIGSTOPped. The load
	// generator routes around both, as a load balancer's health check would.
	down, paused bool
	starts       int
}

// process is a running `pushfan serve`.
type process struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

func newStack(t *testing.T, cfg runConfig, log *slog.Logger) *stack {
	t.Helper()
	pdb, why := startPrivateDB(t)
	dbAddr := "127.0.0.1:3306"
	if pdb != nil {
		t.Setenv(testdb.EnvDSN, pdb.DSN())
		dbAddr = fmt.Sprintf("127.0.0.1:%d", pdb.port)
		log.Info("chaos: a private MariaDB for real restarts", "addr", dbAddr, "dir", pdb.dir)
	} else {
		log.Warn("chaos: NO private MariaDB, so the DB restart fault is only simulated (the proxy refuses connections)", "why", why)
	}
	tdb := testdb.New(t)
	// The replicas' logs stay when the soak failed: they are the evidence.
	dir, err := os.MkdirTemp("", "pushfan-chaos-logs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the replicas' logs are in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	s := &stack{t: t, log: log, cfg: cfg, db: tdb.SQL, dir: dir, faults: &faultLog{}, pdb: pdb, noSQLServer: why, probe: &stallProbe{}}
	s.seed()

	for i, app := range cfg.apps {
		s.emus = append(s.emus, newEmulator(t, cfg, app, cfg.seed+int64(i)))
	}

	s.sink = newHookSink()
	hookSrv := httptest.NewServer(s.sink)
	t.Cleanup(hookSrv.Close)

	s.proxy = teststack.NewProxy(t, dbAddr)
	yaml := filepath.Join(s.dir, "pushfan.yaml")
	if err := os.WriteFile(yaml, []byte(s.configYAML(hookSrv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	s.env = append(os.Environ(),
		"PUSHFAN_MYSQL_DSN="+s.proxy.DSN(tdb.DSN),
		// The default app's, as in the single-app soak; the YAML's apps:
		// names every app's endpoint and project.
		"PUSHFAN_FCM_ENDPOINT="+s.emus[0].url,
		"PUSHFAN_FCM_PROJECT_ID="+cfg.apps[0].project,
		"PUSHFAN_ADMIN_TOKENS="+adminToken,
		"PUSHFAN_INTERNAL_TOKEN="+adminToken,
		"PUSHFAN_LOG_FORMAT=text",
		"PUSHFAN_CONFIG="+yaml,
		"PUSHFAN_WEBHOOK_ALLOW_PRIVATE=true",
		// The drain waits for each undelivered webhook event's next
		// attempt: on the production schedule (5s,30s,2m,10m,...) an event
		// whose first attempts met the sink away or a database fault would
		// hold the short run up to ~12 min for the attempt after its 4th.
		// A short schedule (then every 30 s) keeps the drain within a few
		// minutes; the invariant, every event delivered at least once, is
		// the same.
		"PUSHFAN_WEBHOOK_RETRY_SCHEDULE=2s,5s,10s,20s,30s",
		fmt.Sprintf("PUSHFAN_RATE_LIMIT=%g", cfg.apps[0].rate),
		"PUSHFAN_RATE_WINDOW="+cfg.quotaWindow.String(),
		// The load submits a transactional send every second beside the
		// bulk mix: more than the default 30 a minute per admin token.
		"PUSHFAN_SUBMIT_PER_MINUTE=1200",
		// A send's timeout beyond the longest pause (lease + 5 s): a pause
		// is a lease fault, not also a timeout of the sends in flight,
		// whose answers the emulator gave (a timed-out send that was
		// delivered is counted failed or canceled, which nobody can know).
		"PUSHFAN_SEND_TIMEOUT=30s",
	)
	for _, name := range []string{"replica-a", "replica-b", "replica-c"} {
		r := &replica{name: name}
		if err := s.start(r); err != nil {
			t.Fatal(err)
		}
		s.reps = append(s.reps, r)
	}
	t.Cleanup(s.stopAll)
	keys, err := s.eventKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range s.emus {
		e.arr.keys.Store(keys)
	}
	return s
}

// The emulator's normal latency: FCM's round trip as the drills emulate it.
const (
	baseLatency = 30 * time.Millisecond
	baseJitter  = 5 * time.Millisecond
)

// start runs a new `pushfan serve` for r and waits until it is ready.
func (s *stack) start(r *replica) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("picking a port for %s: %w", r.name, err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r.mu.Lock()
	r.starts++
	n := r.starts
	r.mu.Unlock()
	logFile, err := os.Create(filepath.Join(s.dir, fmt.Sprintf("%s.%d.log", r.name, n)))
	if err != nil {
		return fmt.Errorf("creating %s's log: %w", r.name, err)
	}
	cmd := exec.Command(s.cfg.binary, "serve")
	cmd.Env = append(append([]string{}, s.env...), "PUSHFAN_HTTP_ADDR="+addr, "PUSHFAN_INSTANCE_ID="+r.name)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", r.name, err)
	}
	p := &process{cmd: cmd, url: "http://" + addr, done: make(chan struct{})}
	go func() { // ends when the process does: stopAll kills every process
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	const within = 60 * time.Second // a loaded machine and a migration check
	deadline := time.Now().Add(within)
	for {
		if ready(p.url) {
			break
		}
		select {
		case <-p.done:
			raw, _ := os.ReadFile(logFile.Name())
			return fmt.Errorf("%s exited before it was ready: %s", r.name, strings.ReplaceAll(teststack.Tail(string(raw), 3), "\n", " | "))
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return fmt.Errorf("timed out after %v waiting for %s to answer GET /readyz 200", within, r.name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.mu.Lock()
	r.proc, r.down = p, false
	r.mu.Unlock()
	return nil
}

func ready(base string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(base + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kill sends SIGKILL to r's process and waits until it has exited.
func (s *stack) kill(r *replica) error {
	r.mu.Lock()
	p := r.proc
	r.down = true
	r.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %s: %w", r.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("timed out after 30s waiting for %s (pid %d) to exit after kill -9", r.name, p.cmd.Process.Pid)
	}
}

// signal sends sig (SIGSTOP, SIGCONT) to r's process.
func (s *stack) signal(r *replica, sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.proc.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%v to %s: %w", sig, r.name, err)
	}
	r.paused = sig == syscall.SIGSTOP
	return nil
}

// stopAll kills every process (a paused one too: SIGKILL needs no SIGCONT).
func (s *stack) stopAll() {
	for _, r := range s.reps {
		r.mu.Lock()
		p := r.proc
		r.mu.Unlock()
		if p == nil {
			continue
		}
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			s.t.Errorf("%s (pid %d) did not exit within 30s of kill -9", r.name, p.cmd.Process.Pid)
		}
	}
}

// live returns the base URLs of the replicas neither killed nor paused.
func (s *stack) live() []string {
	var out []string
	for _, r := range s.reps {
		r.mu.Lock()
		if !r.down && !r.paused && r.proc != nil {
			out = append(out, r.proc.url)
		}
		r.mu.Unlock()
	}
	return out
}

// eventKeys are the keys the replicas generated at start and share: with
// them the arrivals log reads each send's broadcast and target.
func (s *stack) eventKeys() (*engagement.Keys, error) {
	var kid string
	var secret []byte
	if err := s.db.QueryRow("SELECT kid, secret FROM event_keys").Scan(&kid, &secret); err != nil {
		return nil, fmt.Errorf("reading the event key: %w", err)
	}
	k, err := engagement.NewKeys([]engagement.Key{{ID: kid, Secret: secret}})
	if err != nil {
		return nil, fmt.Errorf("event key: %w", err)
	}
	return k, nil
}

// errStopped: the run's context ended while a step waited.
var errStopped = errors.New("the run stopped")

// sleep waits d or until ctx is done (errStopped).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errStopped
	case <-t.C:
		return nil
	}
}
