package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// proc is a child process (the emulator or pushfan serve) with its log.
type proc struct {
	name    string
	cmd     *exec.Cmd
	log     string
	done    chan struct{} // closed when the process has exited
	exitErr error         // valid after done
}

// startProc starts bin with args and env, stdout and stderr going to a log
// file in dir (stdout to w as well when w is not nil). The child is killed
// if the driver dies (Pdeathsig) and lives in its own process group, so a
// Ctrl-C reaches only the driver, which stops it in order.
func startProc(name, dir, bin string, args, env []string, stdout io.Writer) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stderr = f
	cmd.Stdout = f
	if stdout != nil {
		cmd.Stdout = io.MultiWriter(f, stdout)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM and waits up to grace, then kills. Safe to call twice.
func (p *proc) stop(grace time.Duration) {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the last lines of the process's log.
func (p *proc) tail(lines int) string {
	raw, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	parts := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// lineWaiter hands the first line a process writes to stdout to a channel.
type lineWaiter struct {
	buf   []byte
	lines chan string
	sent  bool
}

func newLineWaiter() *lineWaiter { return &lineWaiter{lines: make(chan string, 1)} }

func (w *lineWaiter) Write(b []byte) (int, error) {
	if w.sent {
		return len(b), nil
	}
	w.buf = append(w.buf, b...)
	if i := strings.IndexByte(string(w.buf), '\n'); i >= 0 {
		w.lines <- string(w.buf[:i])
		w.sent = true
		w.buf = nil
	}
	return len(b), nil
}

// emulator is a running `pushfan emulator` process.
type emulator struct {
	p        *proc
	endpoint string // base URL including /v1, as pushfan and the SDK want it
	base     string // scheme://addr
	caFile   string
	mode     string
	client   *http.Client // for the emulator's own routes
}

type emulatorSpec struct {
	name            string // its log's name; "emulator" when empty
	latency, jitter time.Duration
	mode            string // http1 | h2c | tls
	quota           int
	quotaWindow     time.Duration
}

func startEmulator(ctx context.Context, bin, dir string, spec emulatorSpec) (*emulator, error) {
	args := []string{"emulator", "--addr", "127.0.0.1:0",
		"--latency", spec.latency.String(), "--jitter", spec.jitter.String()}
	caFile := ""
	switch spec.mode {
	case "http1":
	case "h2c":
		args = append(args, "--h2c")
	case "tls":
		caFile = filepath.Join(dir, "emulator-ca.pem")
		args = append(args, "--tls", "--ca-out", caFile)
	default:
		return nil, fmt.Errorf("MODE %q: want http1, h2c or tls", spec.mode)
	}
	if spec.quota > 0 {
		args = append(args, "--quota", fmt.Sprint(spec.quota), "--quota-window", spec.quotaWindow.String())
	}
	w := newLineWaiter()
	env := append(os.Environ(), "PUSHFAN_LOG_LEVEL=warn")
	name := spec.name
	if name == "" {
		name = "emulator"
	}
	p, err := startProc(name, dir, bin, args, env, w)
	if err != nil {
		return nil, err
	}
	var line string
	select {
	case line = <-w.lines:
	case <-p.done:
		return nil, fmt.Errorf("emulator exited before listening: %v\n%s", p.exitErr, p.tail(20))
	case <-time.After(30 * time.Second):
		p.stop(5 * time.Second)
		return nil, errors.New("emulator did not report its address within 30s")
	case <-ctx.Done():
		p.stop(5 * time.Second)
		return nil, ctx.Err()
	}
	// "fcmemu listening on http://127.0.0.1:PORT/v1 (project any)"
	fields := strings.Fields(line)
	endpoint := ""
	for _, f := range fields {
		if strings.HasPrefix(f, "http://") || strings.HasPrefix(f, "https://") {
			endpoint = f
		}
	}
	if endpoint == "" {
		p.stop(5 * time.Second)
		return nil, fmt.Errorf("unexpected emulator line %q", line)
	}
	e := &emulator{p: p, endpoint: endpoint, base: strings.TrimSuffix(endpoint, "/v1"), caFile: caFile, mode: spec.mode}
	tr, err := clientTransport(spec.mode, caFile, 4)
	if err != nil {
		p.stop(5 * time.Second)
		return nil, err
	}
	e.client = &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	return e, nil
}

// clientTransport is a transport sized for conc concurrent requests that
// speaks the emulator's protocol: HTTP/1.1, h2c (prior knowledge) or TLS
// with HTTP/2 and the emulator's CA. It mirrors pushfan's own FCM transport.
func clientTransport(mode, caFile string, conc int) (*http.Transport, error) {
	t := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          conc + 16,
		MaxIdleConnsPerHost:   conc + 16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	switch mode {
	case "h2c":
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		t.Protocols = &p
	case "tls":
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading emulator CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no certificate", caFile)
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return t, nil
}

// emuStats is the part of GET /emulator/stats the driver reads.
type emuStats struct {
	Requests            int64            `json:"requests"`
	Accepted            int64            `json:"accepted"`
	ByCode              map[string]int64 `json:"by_code"`
	Tokens              int64            `json:"tokens"`
	MaxInFlight         int64            `json:"max_in_flight"`
	ConnectionsAccepted int64            `json:"connections_accepted"`
	ConnectionsOpen     int64            `json:"connections_open"`
	RequestsDuringBack  int64            `json:"requests_during_backoff"`
	CPUSeconds          float64          `json:"cpu_seconds"`
}

func (e *emulator) stats(ctx context.Context) (emuStats, error) {
	var s emuStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/emulator/stats", nil)
	if err != nil {
		return s, err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return s, fmt.Errorf("emulator stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("emulator stats: HTTP %d", resp.StatusCode)
	}
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

func (e *emulator) reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/emulator/reset", nil)
	if err != nil {
		return err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("emulator reset: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("emulator reset: HTTP %d", resp.StatusCode)
	}
	return nil
}

// tokenTally is what the emulator's per-token counts say about one run.
type tokenTally struct {
	Tokens     int64 `json:"tokens"`       // distinct tokens seen
	Delivered  int64 `json:"delivered"`    // tokens accepted at least once
	Duplicates int64 `json:"duplicates"`   // accepted deliveries beyond the first
	MaxAttempt int64 `json:"max_attempts"` // most requests for one token
}

// tally streams GET /emulator/counts ({"tokens":{"T":{...},...},...}) and
// counts tokens delivered once, twice or more, without holding the map.
func (e *emulator) tally(ctx context.Context) (tokenTally, error) {
	var t tokenTally
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/emulator/counts", nil)
	if err != nil {
		return t, err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return t, fmt.Errorf("emulator counts: %w", err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(resp.Body, 1<<20))
	expect := func(want json.Delim) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); !ok || d != want {
			return fmt.Errorf("emulator counts: want %q, got %v", want, tok)
		}
		return nil
	}
	if err := expect('{'); err != nil {
		return t, err
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return t, err
		}
		if key != "tokens" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return t, err
			}
			continue
		}
		if err := expect('{'); err != nil {
			return t, err
		}
		for dec.More() {
			if _, err := dec.Token(); err != nil { // the token
				return t, err
			}
			var c struct {
				Accepted int64 `json:"accepted"`
				Attempts int64 `json:"attempts"`
			}
			if err := dec.Decode(&c); err != nil {
				return t, err
			}
			t.Tokens++
			if c.Accepted >= 1 {
				t.Delivered++
				t.Duplicates += c.Accepted - 1
			}
			t.MaxAttempt = max(t.MaxAttempt, c.Attempts)
		}
		if err := expect('}'); err != nil {
			return t, err
		}
	}
	return t, nil
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
