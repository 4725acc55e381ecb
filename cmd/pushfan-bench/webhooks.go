package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// webhooksReport is `pushfan-bench webhooks`: does the outbox slow the
// checkpoints? Every target is a dead token (the emulator answers
// UNREGISTERED), so every checkpoint invalidates its page of tokens, and
// with webhooks configured also writes their tokens.invalidated events in
// the same transaction. Runs with and without alternate, each on a fresh
// serve, in one invocation.
type webhooksReport struct {
	With    []*webhooksRun `json:"with_webhooks"`
	Without []*webhooksRun `json:"without_webhooks"`
	// Medians, and with over without.
	WithTargetsPerS, WithoutTargetsPerS float64
	WithCPUMicros, WithoutCPUMicros     float64
	ThroughputRatio, CPURatio           float64
}

// webhooksRun is one broadcast of dead tokens: its send rate (targets
// closed per second: they all fail) and, with webhooks, what the receiver
// got and when.
type webhooksRun struct {
	Run *pushfanRun `json:"run"`
	// TargetsPerS is (succeeded + failed) / wall: every send here fails.
	TargetsPerS float64 `json:"targets_per_s"`
	// Events and Tokens: distinct tokens.invalidated events (by
	// webhook-id) and the tokens they listed.
	Events int `json:"events,omitempty"`
	Tokens int `json:"tokens,omitempty"`
	// DeliveredAfterS: from the broadcast's finish until the receiver had
	// every invalidated token.
	DeliveredAfterS float64 `json:"delivered_after_s,omitempty"`
}

const benchHookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // the bench's own receiver; not a credential

func (b *bench) runWebhooks(ctx context.Context, rep *report) error {
	o := b.o
	db, err := dbFor(o.dbPrefix+"_dead", o.n)
	if err != nil {
		return err
	}
	// A database from an earlier run has its tokens invalidated: valid
	// again, it needs no new seed.
	_ = reviveTokens(ctx, db)
	b.dbs[db.name] = true
	if err := ensureSeeded(ctx, o.bin, db, b.logf); err != nil {
		return err
	}
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The emulator answers UNREGISTERED for a token by its prefix.
	if _, err := conn.ExecContext(ctx, "UPDATE device_tokens SET token = CONCAT('unregistered-', token) WHERE token NOT LIKE 'unregistered-%'"); err != nil {
		return fmt.Errorf("making the tokens dead: %w", err)
	}
	emu, err := b.emulator(ctx, 0)
	if err != nil {
		return err
	}
	recv, err := startHookReceiver()
	if err != nil {
		return err
	}
	defer recv.close()
	cfgPath := filepath.Join(b.dir, "webhooks.yaml")
	cfg := fmt.Sprintf("webhooks:\n  - name: bench\n    url: %s\n    secret: %s\n    events: [tokens.invalidated]\n", recv.url, benchHookSecret)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	wr := &webhooksReport{}
	rep.Webhooks = wr
	for i := range o.repeat {
		for _, with := range []bool{i%2 == 0, i%2 != 0} { // alternate which goes first
			if err := reviveTokens(ctx, db); err != nil {
				return err
			}
			recv.reset()
			label, env := "without", o.serveEnv
			if with {
				label, env = "with", append([]string{"PUSHFAN_CONFIG=" + cfgPath, "PUSHFAN_WEBHOOK_ALLOW_PRIVATE=true"}, o.serveEnv...)
			}
			r, err := b.deadBroadcast(ctx, emu, db, fmt.Sprintf("%s-webhooks-run%d", label, i+1), env, with, recv)
			if err != nil {
				return err
			}
			if with {
				wr.With = append(wr.With, r)
			} else {
				wr.Without = append(wr.Without, r)
			}
		}
	}
	// The bench leaves the tokens valid for the next invocation.
	if err := reviveTokens(ctx, db); err != nil {
		return err
	}
	rate := func(r *webhooksRun) float64 { return r.TargetsPerS }
	cpu := func(r *webhooksRun) float64 { return r.Run.CPUMicrosPerMsg }
	wr.WithTargetsPerS, wr.WithoutTargetsPerS = medianOf(wr.With, rate), medianOf(wr.Without, rate)
	wr.WithCPUMicros, wr.WithoutCPUMicros = medianOf(wr.With, cpu), medianOf(wr.Without, cpu)
	if wr.WithoutTargetsPerS > 0 && wr.WithoutCPUMicros > 0 {
		wr.ThroughputRatio, wr.CPURatio = wr.WithTargetsPerS/wr.WithoutTargetsPerS, wr.WithCPUMicros/wr.WithoutCPUMicros
	}
	return nil
}

// deadBroadcast runs one broadcast to the dead tokens on a fresh serve
// and, with webhooks, waits until the receiver has every token listed.
func (b *bench) deadBroadcast(ctx context.Context, emu *emulator, db benchDB, label string, env []string, with bool, recv *hookReceiver) (*webhooksRun, error) {
	o := b.o
	svc, err := startService(ctx, o.bin, b.dir, "serve-"+label, emu, serviceSpec{db: db, concurrency: o.c, rateLimit: o.rateLimit, extraEnv: env})
	if err != nil {
		return nil, err
	}
	b.procs = append(b.procs, svc.p)
	defer svc.stop()
	r, err := runBroadcast(ctx, svc, emu, broadcastSpec{label: label, n: db.n, conc: o.c, rateLimit: o.rateLimit, body: untrackedBody})
	if err != nil {
		return nil, err
	}
	if r.Failed != int64(db.n) || r.EmuByCode["UNREGISTERED"] < int64(db.n) {
		return nil, fmt.Errorf("%s: %d failed, emulator answered %v; want all %d UNREGISTERED", label, r.Failed, r.EmuByCode, db.n)
	}
	wr := &webhooksRun{Run: r}
	if r.WallSeconds > 0 {
		wr.TargetsPerS = float64(r.Succeeded+r.Failed) / r.WallSeconds
	}
	if with {
		finished := time.Now()
		deadline := finished.Add(5 * time.Minute)
		for {
			ev, toks := recv.counts()
			if toks >= db.n {
				wr.Events, wr.Tokens, wr.DeliveredAfterS = ev, toks, time.Since(finished).Seconds()
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("%s: the receiver had %d of %d invalidated tokens 5 min after the finish", label, toks, db.n)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		if wr.Tokens != db.n {
			return nil, fmt.Errorf("%s: tokens.invalidated listed %d tokens, want %d", label, wr.Tokens, db.n)
		}
	}
	b.logf("  %s: %.0f targets/s, %.1f µs CPU/send, peak RSS %.1f MB%s", label, wr.TargetsPerS, r.CPUMicrosPerMsg, r.PeakRSSMB,
		map[bool]string{true: fmt.Sprintf(", %d events listing %d tokens, all delivered %.1f s after the finish", wr.Events, wr.Tokens, wr.DeliveredAfterS)}[with])
	return wr, nil
}

// reviveTokens makes every token valid again, as before a broadcast.
func reviveTokens(ctx context.Context, db benchDB) error {
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "UPDATE device_tokens SET invalidated_at = NULL, invalid_reason = NULL WHERE invalidated_at IS NOT NULL"); err != nil {
		return fmt.Errorf("reviving the tokens of %s: %w", db.name, err)
	}
	return nil
}

// hookReceiver takes tokens.invalidated events and counts the distinct
// events (by webhook-id, since delivery is at least once) and the tokens
// they listed. It does not check signatures: the tests do.
type hookReceiver struct {
	url string
	srv *http.Server

	mu     sync.Mutex
	seen   map[string]bool
	tokens int
}

func startHookReceiver() (*hookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hookReceiver{url: "http://" + ln.Addr().String() + "/hooks", seen: map[string]bool{}}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev struct {
		Type string `json:"type"`
		Data struct {
			Tokens []json.RawMessage `json:"tokens"`
		} `json:"data"`
	}
	body, err := io.ReadAll(r.Body)
	if err != nil || json.Unmarshal(body, &ev) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	if id := r.Header.Get("webhook-id"); ev.Type == "tokens.invalidated" && !h.seen[id] {
		h.seen[id] = true
		h.tokens += len(ev.Data.Tokens)
	}
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) counts() (events, tokens int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen), h.tokens
}

func (h *hookReceiver) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen, h.tokens = map[string]bool{}, 0
}

func (h *hookReceiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
}

func (wr *webhooksReport) print(w io.Writer) {
	fmt.Fprintf(w, "the outbox's cost on the checkpoints (every target a dead token; medians, alternating runs, a fresh serve each):\n")
	fmt.Fprintf(w, "  with webhooks    %8.0f targets/s  %6.1f µs CPU/send\n", wr.WithTargetsPerS, wr.WithCPUMicros)
	fmt.Fprintf(w, "  without webhooks %8.0f targets/s  %6.1f µs CPU/send\n", wr.WithoutTargetsPerS, wr.WithoutCPUMicros)
	fmt.Fprintf(w, "  with/without: throughput %.3f, CPU/send %.3f\n", wr.ThroughputRatio, wr.CPURatio)
	for _, r := range wr.With {
		fmt.Fprintf(w, "  %s: %d tokens.invalidated events listing %d tokens, all delivered %.1f s after the finish\n", r.Run.Label, r.Events, r.Tokens, r.DeliveredAfterS)
	}
}
