package fanout

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startingSender is fakeSender behind a StartingPrepared: StartTagged
// only records the send, and Wait makes it, so that the engine's two-call
// path (start, then wait from a shallow frame) is what runs.
type startingSender struct {
	f       *fakeSender
	starts  atomic.Int64
	tagged  atomic.Int64 // starts that carried a tag
	waitErr atomic.Int64 // Waits that panicked
}

func (s *startingSender) Prepare(m *Message) (Prepared, error) {
	return &startingPrepared{s: s, m: m}, nil
}

type startingPrepared struct {
	s *startingSender
	m *Message
}

func (p *startingPrepared) Send(ctx context.Context, token string, b Budget) Outcome {
	return p.StartTagged(ctx, token, "", b).Wait(ctx)
}

func (p *startingPrepared) SendTagged(ctx context.Context, token, tag string, b Budget) Outcome {
	return p.StartTagged(ctx, token, tag, b).Wait(ctx)
}

func (p *startingPrepared) StartTagged(_ context.Context, token, tag string, _ Budget) Pending {
	p.s.starts.Add(1)
	if tag != "" {
		p.s.tagged.Add(1)
	}
	return &startedSend{p: p, token: token}
}

type startedSend struct {
	p     *startingPrepared
	token string
}

func (w *startedSend) Wait(ctx context.Context) Outcome {
	if strings.HasPrefix(w.token, "waitpanic-") {
		w.p.s.waitErr.Add(1)
		panic("boom in Wait")
	}
	return w.p.s.f.send(ctx, w.p.m, w.token)
}

// A StartingPrepared's sends are started and then waited for, and every
// outcome is counted exactly as a plain Prepared's: successes, dead
// tokens, retries, timeouts, and panics in Wait.
func TestStartingPreparedCountsExactly(t *testing.T) {
	ts := makeTargets(400, func(i int) string {
		switch i % 8 {
		case 1:
			return fmt.Sprintf("dead-%d", i)
		case 2:
			return fmt.Sprintf("flaky-%d", i)
		case 3:
			return fmt.Sprintf("waitpanic-%d", i)
		case 4:
			return fmt.Sprintf("hang-%d", i)
		}
		return fmt.Sprintf("ok-%d", i)
	})
	s := &startingSender{f: &fakeSender{}}
	cfg := Config{Concurrency: 64, MaxAttempts: 3, SendTimeout: 50 * time.Millisecond, RetryBaseDelay: time.Millisecond}
	c, err := runJob(context.Background(), t, testEngine(t, cfg, s), Job{Source: &sliceSource{ts},
		Tag: func(t Target, _ int) string { return fmt.Sprint(t.TokenID) }})
	if err != nil {
		t.Fatal(err)
	}
	if c.Succeeded != 250 || c.Failed != 150 || c.Errors[codeUnregistered] != 50 || c.Errors[CodePanic] != 50 || c.Errors[CodeTimeout] != 50 {
		t.Fatalf("counts: %+v", c)
	}
	// ok 200 + dead 50 once; flaky 50 three times (two failures, then
	// success); waitpanic and hang 50 each, three attempts.
	if want := int64(200 + 50 + 150 + 150 + 150); s.starts.Load() != want || s.tagged.Load() != want {
		t.Fatalf("%d starts (%d tagged), want %d", s.starts.Load(), s.tagged.Load(), want)
	}
	if s.waitErr.Load() != 150 {
		t.Fatalf("%d panics in Wait, want 150", s.waitErr.Load())
	}
}
