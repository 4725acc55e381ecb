package teststack

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Process is a real pushfan binary a test runs as `pushfan serve` (the
// process drills, the console's browser tests). It is killed when the test
// ends, and its log is shown when the test failed.
type Process struct {
	Name    string
	Cmd     *exec.Cmd
	URL     string        // http://127.0.0.1:<port>
	Log     string        // the file holding its stdout and stderr
	Done    chan struct{} // closed when it has exited
	ExitErr error         // valid once Done is closed
}

// BuildPushfan builds the pushfan binary from pkg (a package path such as
// "." or "../cmd/pushfan") into dir, and returns its path. Call it from
// TestMain: once per test binary.
func BuildPushfan(pkg, dir string) (string, error) {
	bin := filepath.Join(dir, "pushfan")
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building pushfan: %w\n%s", err, out)
	}
	return bin, nil
}

// StartServe runs `binary serve` with env plus PUSHFAN_HTTP_ADDR on a free
// loopback port, and waits until it is ready (GET /readyz). name labels
// its log. PUSHFAN_TEST_PROC_LOGS=1 shows every process's whole log.
func StartServe(t testing.TB, binary, name string, env []string) *Process {
	t.Helper()
	return StartServeWithin(t, binary, name, env, 30*time.Second)
}

// StartServeWithin is StartServe for a start that may take longer than
// 30 s: one that migrates a database many versions behind on a loaded
// machine.
func StartServeWithin(t testing.TB, binary, name string, env []string, ready time.Duration) *Process {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(append([]string{}, env...), "PUSHFAN_HTTP_ADDR="+addr)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Name: name, Cmd: cmd, URL: "http://" + addr, Log: logPath, Done: make(chan struct{})}
	go func() {
		p.ExitErr = cmd.Wait()
		logFile.Close()
		close(p.Done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-p.Done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s (pid %d) did not exit within 30s of kill -9", name, cmd.Process.Pid)
		}
		if all := os.Getenv("PUSHFAN_TEST_PROC_LOGS") != ""; t.Failed() || all {
			raw, _ := os.ReadFile(logPath)
			lines := 40
			if all {
				lines = math.MaxInt
			}
			t.Logf("log of %s:\n%s", name, Tail(string(raw), lines))
		}
	})
	deadline := time.Now().Add(ready)
	for {
		if resp, err := http.Get(p.URL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		select {
		case <-p.Done:
			raw, _ := os.ReadFile(logPath)
			t.Fatalf("%s exited before ready: %v\n%s", name, p.ExitErr, raw)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready (GET /readyz) within %v", name, ready)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitExit waits until p has exited after a kill (-9, or SIGTERM, whose
// shutdown deadline is shorter than this).
func (p *Process) WaitExit(t testing.TB, why string) {
	t.Helper()
	const within = 30 * time.Second
	select {
	case <-p.Done:
	case <-time.After(within):
		t.Fatalf("timed out after %v waiting for %s (pid %d) to exit after %s", within, p.Name, p.Cmd.Process.Pid, why)
	}
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	parts := strings.Split(strings.TrimSpace(s), "\n")
	if len(parts) > n {
		parts = parts[len(parts)-n:]
	}
	return strings.Join(parts, "\n")
}
