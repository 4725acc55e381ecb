package fanout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sliceSource pages an in-memory audience by keyset, like the repository.
type sliceSource struct{ ts []Target }

func (s *sliceSource) Page(_ context.Context, after uint64, limit int, dst []Target) ([]Target, error) {
	dst = dst[:0]
	for _, t := range s.ts {
		if t.Cursor > after {
			dst = append(dst, t)
			if len(dst) == limit {
				break
			}
		}
	}
	return dst, nil
}

func makeTargets(n int, token func(i int) string) []Target {
	ts := make([]Target, n)
	for i := range ts {
		ts[i] = Target{Cursor: uint64(i + 1), TokenID: uint64(i + 1), UserID: uint64(i/2 + 1), Token: token(i)}
	}
	return ts
}

// fakeSender answers by token prefix and counts every call per token.
type fakeSender struct {
	calls sync.Map // token -> *atomic.Int64
	total atomic.Int64
	delay time.Duration
	// quotaUntil makes every send before it answer QUOTA_EXCEEDED.
	quotaFirst  atomic.Int64 // unix ns of the first quota answer
	quotaWindow time.Duration
	quotaCount  atomic.Int64
	// sendTimes records when sends started after the first quota answer.
	mu    sync.Mutex
	times []time.Time
}

func (f *fakeSender) count(token string) int64 {
	v, ok := f.calls.Load(token)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func (f *fakeSender) Send(ctx context.Context, _ *Message, token string) error {
	v, _ := f.calls.LoadOrStore(token, new(atomic.Int64))
	n := v.(*atomic.Int64).Add(1)
	f.total.Add(1)
	if f.quotaWindow > 0 {
		f.mu.Lock()
		f.times = append(f.times, time.Now())
		f.mu.Unlock()
	}
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	switch {
	case strings.HasPrefix(token, "dead-"):
		return &SendError{Class: Dead, Code: CodeUnregistered}
	case strings.HasPrefix(token, "flaky-") && n <= 2:
		return &SendError{Class: Transient, Code: CodeInternal}
	case strings.HasPrefix(token, "down-"):
		return &SendError{Class: Transient, Code: CodeUnavailable}
	case strings.HasPrefix(token, "fatal-"):
		return &SendError{Class: Fatal, Code: CodeThirdParty, Detail: "auth refused"}
	case strings.HasPrefix(token, "panic-"):
		panic("boom")
	case strings.HasPrefix(token, "hang-"):
		<-ctx.Done()
		return ctx.Err()
	}
	if f.quotaWindow > 0 && f.quotaCount.Add(1) > 100 && f.quotaCount.Load() < 200 {
		now := time.Now().UnixNano()
		f.quotaFirst.CompareAndSwap(0, now)
		if now < f.quotaFirst.Load()+int64(f.quotaWindow) {
			return &SendError{Class: Transient, Code: CodeQuota, RetryAfter: f.quotaWindow}
		}
	}
	return nil
}

type recordingObserver struct {
	mu       sync.Mutex
	failures []Failure
}

func (o *recordingObserver) Failed(_ context.Context, f Failure) {
	o.mu.Lock()
	o.failures = append(o.failures, f)
	o.mu.Unlock()
}

func testEngine(t *testing.T, cfg Config, s Sender) *Engine {
	t.Helper()
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 64
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 100
	}
	if cfg.SendTimeout == 0 {
		cfg.SendTimeout = 5 * time.Second
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.RetryBaseDelay == 0 {
		cfg.RetryBaseDelay = time.Millisecond
	}
	if cfg.RetryMaxDelay == 0 {
		cfg.RetryMaxDelay = 10 * time.Second
	}
	e, err := New(cfg, s, NewThrottle(1e6, 0), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestRunCountsEveryOutcomeExactly(t *testing.T) {
	const n = 6000
	ts := makeTargets(n, func(i int) string {
		switch {
		case i%10 == 3:
			return fmt.Sprintf("dead-%d", i)
		case i%10 == 7:
			return fmt.Sprintf("flaky-%d", i)
		}
		return fmt.Sprintf("ok-%d", i)
	})
	s := &fakeSender{}
	e := testEngine(t, Config{Concurrency: 300, PageSize: 250}, s)
	obs := &recordingObserver{}
	p := &Progress{}
	if err := e.Run(context.Background(), Job{Message: &Message{Title: "t"}, Source: &sliceSource{ts}, Observer: obs, Progress: p}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	snap := p.Snapshot()
	dead, flaky := int64(n/10), int64(n/10)
	if snap.Attempted != n || snap.Succeeded != n-dead || snap.Failed != dead || snap.Canceled != 0 {
		t.Fatalf("counts: %+v", snap)
	}
	if snap.Errors[CodeUnregistered] != dead || len(snap.Errors) != 1 {
		t.Fatalf("errors: %v", snap.Errors)
	}
	if snap.Dead != dead || snap.Retries != 2*flaky {
		t.Fatalf("dead %d retries %d", snap.Dead, snap.Retries)
	}
	for _, tg := range ts {
		want := int64(1)
		if strings.HasPrefix(tg.Token, "flaky-") {
			want = 3
		}
		if got := s.count(tg.Token); got != want {
			t.Fatalf("token %s sent %d times, want %d", tg.Token, got, want)
		}
	}
	if s.total.Load() != n+2*flaky || snap.HTTPSends != s.total.Load() {
		t.Fatalf("total sends %d, HTTPSends %d", s.total.Load(), snap.HTTPSends)
	}
	if len(obs.failures) != int(dead) || !obs.failures[0].Dead {
		t.Fatalf("observer saw %d failures", len(obs.failures))
	}
	c := p.Commit(false)
	if c.Cursor != n || c.Succeeded != n-dead || c.Failed != dead || c.Dead != dead || c.Errors[CodeUnregistered] != dead {
		t.Fatalf("commit %+v", c)
	}
	if again := p.Commit(false); !again.IsZero() || again.Cursor != n {
		t.Fatalf("second commit %+v, want an empty delta", again)
	}
}

func TestRunResumesAfterCursor(t *testing.T) {
	ts := makeTargets(500, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	s := &fakeSender{}
	p := &Progress{}
	if err := testEngine(t, Config{}, s).Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, After: 200, Progress: p}); err != nil {
		t.Fatal(err)
	}
	if got := p.Snapshot(); got.Attempted != 300 || got.Succeeded != 300 {
		t.Fatalf("resume: %+v", got)
	}
	if s.count("ok-199") != 0 || s.count("ok-200") != 1 {
		t.Fatal("resume sent targets at or below the cursor")
	}
}

func TestRetriesStopAtMaxAttempts(t *testing.T) {
	ts := makeTargets(50, func(i int) string { return fmt.Sprintf("down-%d", i) })
	s := &fakeSender{}
	obs := &recordingObserver{}
	p := &Progress{}
	if err := testEngine(t, Config{MaxAttempts: 3}, s).Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, Observer: obs, Progress: p}); err != nil {
		t.Fatal(err)
	}
	snap := p.Snapshot()
	if snap.Failed != 50 || snap.Errors[CodeUnavailable] != 50 || snap.Dead != 0 {
		t.Fatalf("counts: %+v", snap)
	}
	for _, f := range obs.failures {
		if f.Attempts != 3 || f.Code != CodeUnavailable {
			t.Fatalf("failure %+v, want 3 attempts", f)
		}
	}
	if s.total.Load() != 150 {
		t.Fatalf("sends %d, want 150", s.total.Load())
	}
}

func TestRetryMaxDelayEndsRetries(t *testing.T) {
	ts := makeTargets(10, func(i int) string { return fmt.Sprintf("down-%d", i) })
	s := &fakeSender{}
	p := &Progress{}
	// The first backoff (>= 1 s with RetryAfter-free full jitter of 2 s base) would
	// usually exceed a 1 ms total budget: every token fails after few attempts.
	e := testEngine(t, Config{MaxAttempts: 50, RetryBaseDelay: time.Second, RetryMaxDelay: time.Millisecond}, s)
	if err := e.Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: p}); err != nil {
		t.Fatal(err)
	}
	if snap := p.Snapshot(); snap.Failed != 10 || s.total.Load() >= 50*10 {
		t.Fatalf("counts %+v sends %d", snap, s.total.Load())
	}
}

func TestFatalStopsEarly(t *testing.T) {
	ts := makeTargets(20000, func(i int) string { return fmt.Sprintf("fatal-%d", i) })
	s := &fakeSender{}
	p := &Progress{}
	err := testEngine(t, Config{Concurrency: 16}, s).Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: p})
	var fatal *ErrFatal
	if !errors.As(err, &fatal) || fatal.Outcome.Code != CodeThirdParty {
		t.Fatalf("err = %v, want ErrFatal THIRD_PARTY_AUTH_ERROR", err)
	}
	snap := p.Snapshot()
	if s.total.Load() > 1000 {
		t.Fatalf("sent %d of 20000 after a fatal answer", s.total.Load())
	}
	if snap.Succeeded+snap.Failed+snap.Canceled != snap.Attempted {
		t.Fatalf("counts do not add up: %+v", snap)
	}
	if snap.Failed != s.total.Load() {
		t.Fatalf("failed %d != sends %d", snap.Failed, s.total.Load())
	}
}

func TestCancelStopsTakingWork(t *testing.T) {
	ts := makeTargets(5000, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	s := &fakeSender{delay: 2 * time.Millisecond}
	p := &Progress{}
	ctx, cancel := context.WithCancelCause(context.Background())
	errCanceled := errors.New("canceled by admin")
	go func() {
		for p.Succeeded.Load() < 500 {
			time.Sleep(time.Millisecond)
		}
		cancel(errCanceled)
	}()
	err := testEngine(t, Config{Concurrency: 32}, s).Run(ctx, Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: p})
	if !errors.Is(err, errCanceled) {
		t.Fatalf("err = %v", err)
	}
	sent := s.total.Load()
	snap := p.Snapshot()
	if snap.Canceled == 0 || snap.Succeeded+snap.Failed+snap.Canceled != snap.Attempted {
		t.Fatalf("counts: %+v", snap)
	}
	if snap.Succeeded != sent {
		t.Fatalf("succeeded %d != sent %d: an in-flight send was lost", snap.Succeeded, sent)
	}
	time.Sleep(20 * time.Millisecond)
	if s.total.Load() != sent {
		t.Fatal("sends continued after Run returned")
	}
}

func TestPanicInSenderIsAFailure(t *testing.T) {
	ts := makeTargets(10, func(i int) string { return fmt.Sprintf("panic-%d", i) })
	p := &Progress{}
	if err := testEngine(t, Config{MaxAttempts: 2}, &fakeSender{}).Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: p}); err != nil {
		t.Fatal(err)
	}
	if snap := p.Snapshot(); snap.Failed != 10 || snap.Errors[CodePanic] != 10 {
		t.Fatalf("counts: %+v", snap)
	}
}

func TestSendTimeoutApplies(t *testing.T) {
	ts := makeTargets(8, func(i int) string { return fmt.Sprintf("hang-%d", i) })
	p := &Progress{}
	s := &fakeSender{}
	if err := testEngine(t, Config{MaxAttempts: 2, SendTimeout: 50 * time.Millisecond}, s).Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: p}); err != nil {
		t.Fatal(err)
	}
	if snap := p.Snapshot(); snap.Failed != 8 || snap.Errors[CodeTimeout] != 8 || s.total.Load() != 16 {
		t.Fatalf("counts: %+v sends %d", snap, s.total.Load())
	}
}

func TestQuotaPausesEveryWorker(t *testing.T) {
	ts := makeTargets(600, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	s := &fakeSender{quotaWindow: 700 * time.Millisecond}
	p := &Progress{}
	if err := testEngine(t, Config{Concurrency: 50, MaxAttempts: 10, RetryMaxDelay: time.Minute}, s).Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: p}); err != nil {
		t.Fatal(err)
	}
	snap := p.Snapshot()
	if snap.Succeeded != 600 || snap.Failed != 0 {
		t.Fatalf("counts: %+v", snap)
	}
	for _, tg := range ts {
		if s.count(tg.Token) < 1 {
			t.Fatalf("%s never sent", tg.Token)
		}
	}
	// No send may start inside the announced window, except those already
	// past the throttle when the first 429 arrived (at most Concurrency).
	first := time.Unix(0, s.quotaFirst.Load())
	var inside int
	s.mu.Lock()
	for _, at := range s.times {
		if at.After(first.Add(10*time.Millisecond)) && at.Before(first.Add(s.quotaWindow)) {
			inside++
		}
	}
	s.mu.Unlock()
	if inside > 50 {
		t.Fatalf("%d sends started during the Retry-After window", inside)
	}
}

func TestBackoffFullJitterBounds(t *testing.T) {
	for n := 1; n <= 10; n++ {
		ceiling := min(100*time.Millisecond<<(n-1), 2*time.Second)
		for range 200 {
			if d := backoff(100*time.Millisecond, 2*time.Second, n); d < 0 || d > ceiling {
				t.Fatalf("backoff(%d) = %v, ceiling %v", n, d, ceiling)
			}
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		"-3":                            0,
		"soon":                          0,
		"Sun, 29 Nov 2026 12:00:30 GMT": 30 * time.Second,
		"Sun, 29 Nov 2026 11:00:00 GMT": 0,
		"99999999999999999":             24 * time.Hour, // would overflow time.Duration
		"86400":                         24 * time.Hour,
		"Fri, 31 Dec 9999 23:59:59 GMT": 24 * time.Hour,
	}
	for in, want := range cases {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestThrottlePauseBlocksUntilDeadline(t *testing.T) {
	th := NewThrottle(1000, 0)
	until := time.Now().Add(150 * time.Millisecond)
	th.Pause(until)
	if err := th.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(until) {
		t.Fatal("Wait returned inside the pause")
	}
	ctx, cancel := context.WithCancel(context.Background())
	th.Pause(time.Now().Add(time.Hour))
	cancel()
	if err := th.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait during pause with canceled ctx = %v", err)
	}
}

func TestClassifyPassesSendErrorThrough(t *testing.T) {
	se := &SendError{Class: Dead, Code: CodeUnregistered}
	if got := Classify(fmt.Errorf("wrapped: %w", se)); got.Class != Dead || got.Code != CodeUnregistered {
		t.Fatalf("got %+v", got)
	}
	if got := Classify(nil); got.Class != Success {
		t.Fatalf("nil → %v", got.Class)
	}
	if got := Classify(context.DeadlineExceeded); got.Class != Transient || got.Code != CodeTimeout {
		t.Fatalf("deadline → %+v", got)
	}
}

// A run stopped for a resume (shutdown, lost lease) commits only a prefix
// with no canceled target; resuming from its cursor reaches every target,
// and re-sends at most what was sent above the cursor.
func TestResumableCommitThenResumeCoversEveryTarget(t *testing.T) {
	const n = 3000
	ts := makeTargets(n, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	s := &fakeSender{delay: time.Millisecond}
	p := &Progress{}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for p.Succeeded.Load() < 700 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	e := testEngine(t, Config{Concurrency: 16, PageSize: 100}, s)
	_ = e.Run(ctx, Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: p})
	c := p.Commit(true)
	if c.Cursor == 0 || c.Cursor >= n || c.Canceled != 0 || c.Succeeded != int64(c.Cursor) {
		t.Fatalf("resumable commit %+v: want a prefix of successes only", c)
	}
	for _, tg := range ts[:c.Cursor] {
		if s.count(tg.Token) != 1 {
			t.Fatalf("%s at or below the cursor was not sent once", tg.Token)
		}
	}
	if again := p.Commit(true); !again.IsZero() || again.Cursor != c.Cursor {
		t.Fatalf("a second resumable commit moved on: %+v", again)
	}
	firstRun := s.total.Load()
	p2 := &Progress{}
	if err := e.Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, After: c.Cursor, Progress: p2}); err != nil {
		t.Fatal(err)
	}
	c2 := p2.Commit(false)
	if c.Succeeded+c2.Succeeded != n || c2.Cursor != n {
		t.Fatalf("resume committed %+v after %+v", c2, c)
	}
	dups := firstRun - int64(c.Cursor)
	for _, tg := range ts {
		if s.count(tg.Token) < 1 {
			t.Fatalf("%s never sent", tg.Token)
		}
	}
	if dups > 16+100 {
		t.Fatalf("%d duplicates, more than in-flight + one page", dups)
	}
	t.Logf("resume after cursor %d: %d duplicate sends", c.Cursor, dups)
}

// A quota 429 with an absurd Retry-After pauses the engine for at most
// RetryMaxDelay, and the token, which cannot wait that long, fails.
func TestQuotaPauseIsCappedByRetryMaxDelay(t *testing.T) {
	s := &hourQuotaSender{}
	e := testEngine(t, Config{Concurrency: 2, RetryMaxDelay: 300 * time.Millisecond}, s)
	p := &Progress{}
	start := time.Now()
	ts := makeTargets(1, func(int) string { return "ok-0" })
	if err := e.Run(context.Background(), Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: p}); err != nil {
		t.Fatal(err)
	}
	if snap := p.Snapshot(); snap.Failed != 1 || snap.Errors[CodeQuota] != 1 {
		t.Fatalf("counts %+v", snap)
	}
	until := e.throttle.PausedUntil()
	if until.Sub(start) > time.Second {
		t.Fatalf("paused until %v after the start, want at most RetryMaxDelay", until.Sub(start))
	}
}

type hourQuotaSender struct{}

func (hourQuotaSender) Send(context.Context, *Message, string) error {
	return &SendError{Class: Transient, Code: CodeQuota, RetryAfter: time.Hour}
}
