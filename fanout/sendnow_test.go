package fanout

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SendNow: one outcome per token in order, transient answers retried at
// most retries times, a quota answer pauses the shared throttle and the
// retry waits it out, a panic is a transient failure, and the message id
// comes through.
func TestSendNowOutcomes(t *testing.T) {
	var mu sync.Mutex
	calls := map[string][]time.Time{}
	var quotaAt atomic.Int64
	sender := senderFunc(func(ctx context.Context, _ *Message, token string) Outcome {
		mu.Lock()
		calls[token] = append(calls[token], time.Now())
		n := len(calls[token])
		mu.Unlock()
		switch {
		case token == "ok":
			return Outcome{Class: Success, MessageID: "projects/p/messages/1"}
		case token == "dead":
			return Outcome{Class: Dead, Code: codeUnregistered, Detail: "gone"}
		case token == "down":
			return Outcome{Class: Transient, Code: codeUnavailable}
		case token == "quota" && n == 1:
			quotaAt.Store(time.Now().UnixNano())
			return Outcome{Class: Transient, Code: CodeQuota, RetryAfter: 300 * time.Millisecond}
		case token == "quota":
			return Outcome{Class: Success, MessageID: "projects/p/messages/2"}
		case token == "panic":
			panic("boom")
		}
		return Outcome{Class: Fatal, Code: "UNEXPECTED", Detail: token}
	})
	th := NewThrottle(1e6, 0, 0)
	e := testEngineWith(t, Config{MaxAttempts: 5}, sender, th)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tokens := []string{"ok", "dead", "down", "quota", "panic"}
	outs, err := e.SendNow(ctx, &Message{Body: "x"}, tokens, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != len(tokens) {
		t.Fatalf("%d outcomes for %d tokens", len(outs), len(tokens))
	}
	want := []struct {
		class    Class
		code, id string
		requests int
	}{
		{Success, "", "projects/p/messages/1", 1},
		{Dead, codeUnregistered, "", 1},
		{Transient, codeUnavailable, "", 3}, // the first attempt and two retries
		{Success, "", "projects/p/messages/2", 2},
		{Transient, CodePanic, "", 3},
	}
	for i, w := range want {
		o := outs[i]
		if o.Class != w.class || o.Code != w.code || o.MessageID != w.id || o.Requests != w.requests {
			t.Errorf("%s: %v/%s id %q after %d requests; want %v/%s id %q after %d", tokens[i], o.Class, o.Code, o.MessageID, o.Requests, w.class, w.code, w.id, w.requests)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, w := range want {
		if n := len(calls[tokens[i]]); n != w.requests {
			t.Errorf("%s: the sender saw %d attempts, want %d", tokens[i], n, w.requests)
		}
	}
	// The quota answer paused the throttle every Run shares, and the retry
	// went after the pause.
	first := time.Unix(0, quotaAt.Load())
	if p := th.PausedUntil(); p.Sub(first) < 250*time.Millisecond {
		t.Fatalf("throttle paused until %v, %v after the quota answer; want its 300ms Retry-After", p, p.Sub(first))
	}
	if q := calls["quota"]; len(q) == 2 && q[1].Sub(q[0]) < 300*time.Millisecond {
		t.Fatalf("the quota retry went %v after the 429, inside its Retry-After", q[1].Sub(q[0]))
	}
}

// A retry that could not start before the deadline is not waited for: the
// answer comes back with the last outcome at once.
func TestSendNowAnswersByTheDeadline(t *testing.T) {
	sender := senderFunc(func(ctx context.Context, _ *Message, token string) Outcome {
		if strings.HasPrefix(token, "hang") {
			<-ctx.Done()
			return Outcome{Class: Transient, Code: "CANCELED"}
		}
		return Outcome{Class: Transient, Code: codeUnavailable, RetryAfter: time.Minute}
	})
	e := testEngineWith(t, Config{SendTimeout: 200 * time.Millisecond}, sender, NewThrottle(1e6, 0, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	outs, err := e.SendNow(ctx, &Message{Body: "x"}, []string{"later", "hang"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Fatalf("SendNow took %v with a 2s deadline, a 1-minute Retry-After and a 200ms send timeout", took)
	}
	if o := outs[0]; o.Code != codeUnavailable || o.Requests != 1 {
		t.Fatalf("later: %+v, want UNAVAILABLE after one request (the retry is past the deadline)", o)
	}
	// The hanging token: each attempt cut by the send timeout, retried
	// within the deadline.
	if o := outs[1]; o.Code != CodeTimeout || o.Requests != 3 {
		t.Fatalf("hang: %+v, want TIMEOUT after 3 requests", o)
	}
}

func TestSendNowAfterStop(t *testing.T) {
	e, err := New(Config{Concurrency: 1, PageSize: 1, SendTimeout: time.Second, MaxAttempts: 1}, senderFunc(func(context.Context, *Message, string) Outcome {
		return Outcome{}
	}), NewThrottle(1e6, 0, 0), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e.Start(context.Background())
	if err := e.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SendNow(context.Background(), &Message{}, []string{"ok"}, 0); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("SendNow on a stopped engine: %v, want ErrNotRunning", err)
	}
}
