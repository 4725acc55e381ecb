package main

// These tests run the real pushfan binary as separate processes against one
// MariaDB database and an in-process FCM emulator, and kill them: kill -9
// (crash), SIGTERM (deploy), and two replicas sharing a broadcast.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"pushfan/internal/apiclient"
	"strings"
	"syscall"
	"testing"
	"time"

	"pushfan/fcmemu"
	"pushfan/internal/testdb"
	"pushfan/repository"
)

const procToken = "process-test-admin-token-0123"

// binary is built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pushfan-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "pushfan")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building pushfan: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// procEnv is a database, an emulator and the settings of the processes.
type procEnv struct {
	t     *testing.T
	store *repository.Store
	emu   *fcmemu.Emulator
	env   []string
	n     int
	// Knobs that bound duplicates; see README "Crash safety".
	concurrency, pageSize, chunkParallel int
	flush                                time.Duration
}

func newProcEnv(t *testing.T, n int) *procEnv {
	store, dsn := testdb.New(t)
	emu := fcmemu.New(fcmemu.Config{Latency: 10 * time.Millisecond, Jitter: 5 * time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(emu.Handler())
	t.Cleanup(srv.Close)
	if _, _, err := store.SeedDemo(t.Context(), repository.SeedOptions{Users: n, TokensPerUserMax: 1}); err != nil {
		t.Fatal(err)
	}
	e := &procEnv{t: t, store: store, emu: emu, n: n, concurrency: 64, pageSize: 200, chunkParallel: 4, flush: 200 * time.Millisecond}
	e.env = append(os.Environ(),
		"PUSHFAN_MYSQL_DSN="+dsn,
		"PUSHFAN_FCM_ENDPOINT="+srv.URL+"/v1",
		"PUSHFAN_FCM_PROJECT_ID=process-test",
		"PUSHFAN_ADMIN_TOKENS="+procToken,
		fmt.Sprintf("PUSHFAN_CONCURRENCY=%d", e.concurrency),
		fmt.Sprintf("PUSHFAN_PAGE_SIZE=%d", e.pageSize),
		fmt.Sprintf("PUSHFAN_CHUNK_PARALLEL=%d", e.chunkParallel),
		"PUSHFAN_FLUSH_INTERVAL="+e.flush.String(),
		"PUSHFAN_LEASE=2s",
		"PUSHFAN_CHUNK_WIDTH=1000",
		"PUSHFAN_POLL_INTERVAL=100ms",
		"PUSHFAN_SHUTDOWN_TIMEOUT=15s",
		"PUSHFAN_LOG_FORMAT=text",
	)
	return e
}

type proc struct {
	cmd     *exec.Cmd
	url     string
	done    chan struct{} // closed when the process has exited
	exitErr error         // valid after done
	log     string
}

// start runs `pushfan serve` and waits until it is ready.
func (e *procEnv) start(name string) *proc {
	e.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logPath := filepath.Join(e.t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(append([]string{}, e.env...), "PUSHFAN_HTTP_ADDR="+addr, "PUSHFAN_INSTANCE_ID="+name)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &proc{cmd: cmd, url: "http://" + addr, done: make(chan struct{}), log: logPath}
	go func() {
		p.exitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if e.t.Failed() {
			raw, _ := os.ReadFile(logPath)
			e.t.Logf("log of %s:\n%s", name, tail(string(raw), 40))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		select {
		case <-p.done:
			raw, _ := os.ReadFile(logPath)
			e.t.Fatalf("%s exited before ready: %v\n%s", name, p.exitErr, raw)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s not ready after 30s", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimSpace(s), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// broadcastView is the API's broadcast object as this client reads it.
type broadcastView = apiclient.Broadcast

func (e *procEnv) call(base, method, path, body string) broadcastView {
	e.t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+procToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var b broadcastView
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return b
}

func (e *procEnv) submit(p *proc) broadcastView {
	return e.call(p.url, "POST", "/push/broadcast?wait=0", `{"title":"crash test","audience":{"all":true}}`)
}

// waitAccepted blocks until the emulator accepted at least frac of n.
func (e *procEnv) waitAccepted(frac float64) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for e.emu.Stats().Accepted < int64(frac*float64(e.n)) {
		if time.Now().After(deadline) {
			e.t.Fatalf("only %d accepted", e.emu.Stats().Accepted)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *procEnv) waitFinished(p *proc, id uint64) broadcastView {
	e.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		b := e.call(p.url, "GET", fmt.Sprintf("/push/broadcasts/%d", id), "")
		if b.Status == "completed" || b.Status == "failed" || b.Status == "canceled" {
			return b
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("broadcast %d still %s", id, b.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// verify checks every token was delivered, the row matches the emulator,
// and returns the number of duplicate deliveries.
func (e *procEnv) verify(b broadcastView) (dups int64) {
	e.t.Helper()
	if b.Status != "completed" || b.Targeted != int64(e.n) || b.Succeeded != int64(e.n) || b.Failed != 0 || b.Canceled != 0 {
		e.t.Fatalf("final broadcast %+v, want %d completed", b, e.n)
	}
	var missing, delivered int64
	for uid := 1; uid <= e.n; uid++ {
		c := e.emu.Counts(repository.SeedTokenName(uint64(uid), 1, false))
		switch {
		case c.Accepted == 0:
			missing++
		default:
			delivered++
			dups += c.Accepted - 1
		}
	}
	if missing != 0 || delivered != b.Succeeded {
		e.t.Fatalf("%d tokens never delivered; %d delivered vs succeeded %d", missing, delivered, b.Succeeded)
	}
	return dups
}

// bound is the documented duplicate bound after a crash: per chunk run, the
// sends since its last checkpoint plus the targets it held above its
// checkpoint cursor (in flight or finished out of order).
func (e *procEnv) bound(throughput float64) int64 {
	workers := e.concurrency / e.chunkParallel
	return int64(throughput*e.flush.Seconds()) + int64(e.chunkParallel*(2*e.pageSize+workers))
}

// waitTakeover returns how long after since a chunk of broadcast id was
// first claimed from an expired lease.
func (e *procEnv) waitTakeover(id uint64, since time.Time) time.Duration {
	e.t.Helper()
	for time.Since(since) < time.Minute {
		chunks, err := e.store.ListChunks(context.Background(), id)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, c := range chunks {
			if c.Takeovers > 0 {
				return time.Since(since)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatal("no takeover within a minute")
	return 0
}

func TestKill9MidBroadcastResumesAfterRestart(t *testing.T) {
	for _, at := range []float64{0.2, 0.4, 0.7} {
		t.Run(fmt.Sprintf("at_%.0f%%", at*100), func(t *testing.T) {
			e := newProcEnv(t, 20000)
			a := e.start("crashing")
			b := e.submit(a)
			start := time.Now()
			e.waitAccepted(at)
			sent := e.emu.Stats().Accepted
			throughput := float64(sent) / time.Since(start).Seconds()
			if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-a.done
			killed := time.Now()
			time.Sleep(100 * time.Millisecond) // let answers already on the wire land
			before := e.emu.Stats().Accepted
			restart := time.Now()
			r := e.start("restarted")
			for e.emu.Stats().Accepted <= before+int64(e.concurrency) && time.Since(killed) < time.Minute {
				time.Sleep(5 * time.Millisecond)
			}
			resumedAfter := time.Since(killed)
			tookOverAfter := e.waitTakeover(b.ID, killed)
			final := e.waitFinished(r, b.ID)
			dups := e.verify(final)
			chunks, err := e.store.ListChunks(t.Context(), b.ID)
			if err != nil {
				t.Fatal(err)
			}
			var takeovers int
			for _, c := range chunks {
				takeovers += c.Takeovers
			}
			if takeovers == 0 {
				t.Fatal("no chunk was taken over: the crash happened after the work was done?")
			}
			if limit := e.bound(throughput); dups > limit {
				t.Fatalf("%d duplicates, above the documented bound %d", dups, limit)
			}
			t.Logf("kill -9 at %d/%d (%.0f sends/s): sending resumed %v after the kill (pending chunks), the first expired lease was taken over %v after it (lease 2 s), finished %v after restart; missing 0, duplicates %d (bound %d), %d chunks taken over",
				sent, e.n, throughput, resumedAfter.Round(time.Millisecond), tookOverAfter.Round(time.Millisecond), time.Since(restart).Round(time.Millisecond), dups, e.bound(throughput), takeovers)
		})
	}
}

func TestSIGTERMReleasesLeasesAndAnotherInstanceFinishes(t *testing.T) {
	e := newProcEnv(t, 20000)
	a := e.start("deploying")
	b := e.submit(a)
	e.waitAccepted(0.4)
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopAt := time.Now()
	select {
	case <-a.done:
		if a.exitErr != nil {
			raw, _ := os.ReadFile(a.log)
			t.Fatalf("SIGTERM: exit %v, want 0\n%s", a.exitErr, tail(string(raw), 30))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not exit within the shutdown deadline")
	}
	took := time.Since(stopAt)
	chunks, err := e.store.ListChunks(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if c.Status == "leased" {
			t.Fatalf("chunk %d still leased by %s after a graceful exit", c.Seq, c.LeaseOwner.String)
		}
	}
	takeoverStart := time.Now()
	n := e.start("next")
	final := e.waitFinished(n, b.ID)
	dups := e.verify(final)
	if dups > int64(e.concurrency) {
		t.Fatalf("%d duplicates after a graceful stop; only in-flight sends (%d) may repeat", dups, e.concurrency)
	}
	t.Logf("SIGTERM: exited 0 in %v; the next instance finished in %v with %d duplicates", took.Round(time.Millisecond), time.Since(takeoverStart).Round(time.Millisecond), dups)
}

func TestTwoProcessesShareABroadcastAndSurviveAKill(t *testing.T) {
	e := newProcEnv(t, 30000)
	a := e.start("replica-a")
	bp := e.start("replica-b")
	b := e.submit(a)
	e.waitAccepted(0.4)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	final := e.waitFinished(bp, b.ID)
	dups := e.verify(final)
	chunks, err := e.store.ListChunks(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	doneBy := map[string]int{}
	for _, c := range chunks {
		doneBy[c.DoneBy.String]++
	}
	if doneBy["replica-a"] == 0 || doneBy["replica-b"] == 0 {
		t.Fatalf("chunks done by %v: both replicas should have sent", doneBy)
	}
	t.Logf("two replicas: chunks done %v, duplicates after killing one: %d", doneBy, dups)
}
