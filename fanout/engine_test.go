package fanout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
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

// senderFunc adapts a function to Sender; Prepare binds the message.
type senderFunc func(ctx context.Context, m *Message, token string) Outcome

func (f senderFunc) Prepare(m *Message) (Prepared, error) { return preparedFunc{f, m}, nil }

type preparedFunc struct {
	f senderFunc
	m *Message
}

func (p preparedFunc) Send(ctx context.Context, token string, _ Budget) Outcome {
	return p.f(ctx, p.m, token)
}

// Codes of FCM's that the fake answers with (the engine has no list of them).
const (
	codeUnregistered = "UNREGISTERED"
	codeInternal     = "INTERNAL"
	codeUnavailable  = "UNAVAILABLE"
	codeThirdParty   = "THIRD_PARTY_AUTH_ERROR"
)

func (f *fakeSender) Prepare(m *Message) (Prepared, error) { return senderFunc(f.send).Prepare(m) }

func (f *fakeSender) send(ctx context.Context, _ *Message, token string) Outcome {
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
			return Outcome{Class: Transient, Code: "CANCELED"}
		}
	}
	switch {
	case strings.HasPrefix(token, "dead-"):
		return Outcome{Class: Dead, Code: codeUnregistered}
	case strings.HasPrefix(token, "flaky-") && n <= 2:
		return Outcome{Class: Transient, Code: codeInternal}
	case strings.HasPrefix(token, "down-"):
		return Outcome{Class: Transient, Code: codeUnavailable}
	case strings.HasPrefix(token, "fatal-"):
		return Outcome{Class: Fatal, Code: codeThirdParty, Detail: "auth refused"}
	case strings.HasPrefix(token, "panic-"):
		panic("boom")
	case strings.HasPrefix(token, "hang-"):
		<-ctx.Done()
		return Outcome{Class: Transient, Code: "CANCELED"} // the engine names it TIMEOUT
	}
	if f.quotaWindow > 0 && f.quotaCount.Add(1) > 100 && f.quotaCount.Load() < 200 {
		now := time.Now().UnixNano()
		f.quotaFirst.CompareAndSwap(0, now)
		if now < f.quotaFirst.Load()+int64(f.quotaWindow) {
			return Outcome{Class: Transient, Code: CodeQuota, RetryAfter: f.quotaWindow}
		}
	}
	return Outcome{}
}

// run runs job to its end on e and returns what a final checkpoint would
// store.
func runJob(ctx context.Context, t *testing.T, e *Engine, job Job) (Committed, error) {
	t.Helper()
	if job.Progress == nil {
		job.Progress = &Progress{}
	}
	if job.Message == nil {
		job.Message = &Message{}
	}
	err := e.Run(ctx, job)
	return job.Progress.Commit(false), err
}

func testEngine(t *testing.T, cfg Config, s Sender) *Engine {
	t.Helper()
	return testEngineWith(t, cfg, s, NewThrottle(1e6, 0, 0))
}

// testEngineWith is testEngine with the given throttle.
func testEngineWith(t *testing.T, cfg Config, s Sender, th *Throttle) *Engine {
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
	e, err := New(cfg, s, th, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	e.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Errorf("stopping the engine: %v", err)
		}
	})
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
	p := &Progress{}
	c, err := runJob(context.Background(), t, e, Job{Message: &Message{Title: "t"}, Source: &sliceSource{ts}, Progress: p})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	dead, flaky := int64(n/10), int64(n/10)
	if c.Cursor != n || len(c.Done) != 0 || c.Succeeded != n-dead || c.Failed != dead || c.Canceled != 0 {
		t.Fatalf("commit: cursor %d, %d ranges, %d/%d/%d", c.Cursor, len(c.Done), c.Succeeded, c.Failed, c.Canceled)
	}
	if c.Errors[codeUnregistered] != dead || len(c.Errors) != 1 {
		t.Fatalf("errors: %v", c.Errors)
	}
	if len(c.Failures) != int(dead) {
		t.Fatalf("%d failures, want %d", len(c.Failures), dead)
	}
	for _, f := range c.Failures {
		if !f.Dead || f.Attempts != 1 || !strings.HasPrefix(f.Target.Token, "dead-") || f.Target.TokenID != f.Target.Cursor {
			t.Fatalf("failure %+v", f)
		}
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
	if s.total.Load() != n+2*flaky {
		t.Fatalf("total sends %d, want %d", s.total.Load(), n+2*flaky)
	}
	if again := p.Commit(false); !again.IsZero() || again.Cursor != n || len(again.Failures) != 0 {
		t.Fatalf("second commit %+v, want an empty delta", again)
	}
}

func TestRunResumesAfterCursor(t *testing.T) {
	ts := makeTargets(500, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	s := &fakeSender{}
	c, err := runJob(context.Background(), t, testEngine(t, Config{}, s), Job{Source: &sliceSource{ts}, After: 200})
	if err != nil {
		t.Fatal(err)
	}
	if c.Succeeded != 300 || c.Cursor != 500 || s.total.Load() != 300 {
		t.Fatalf("resume: %+v, %d sends", c, s.total.Load())
	}
	if s.count("ok-199") != 0 || s.count("ok-200") != 1 {
		t.Fatal("resume sent targets at or below the cursor")
	}
}

// Skip ranges are not sent and not counted, and stay in the done ranges
// until the cursor passes them.
func TestRunSkipsDoneRanges(t *testing.T) {
	ts := makeTargets(1000, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	s := &fakeSender{}
	skip := []Range{{101, 150}, {151, 160}, {400, 799}, {990, 2000}}
	c, err := runJob(context.Background(), t, testEngine(t, Config{PageSize: 64}, s), Job{Source: &sliceSource{ts}, After: 100, Skip: skip})
	if err != nil {
		t.Fatal(err)
	}
	want := int64(1000 - 100 - 60 - 400 - 11)
	if c.Succeeded != want || s.total.Load() != want || c.Cursor != 2000 || len(c.Done) != 0 {
		t.Fatalf("commit %+v after %d sends, want %d sent and counted", c, s.total.Load(), want)
	}
	for _, id := range []int{101, 150, 160, 400, 799, 990, 1000} {
		if n := s.count(fmt.Sprintf("ok-%d", id-1)); n != 0 {
			t.Fatalf("target %d inside a skip range was sent %d times", id, n)
		}
	}
	for _, id := range []int{161, 399, 800, 989} {
		if n := s.count(fmt.Sprintf("ok-%d", id-1)); n != 1 {
			t.Fatalf("target %d outside the skip ranges was sent %d times", id, n)
		}
	}
}

// Commit's done ranges: runs of committed targets above the cursor, across
// page boundaries and skip ranges.
func TestCommitDoneRanges(t *testing.T) {
	p := &Progress{}
	p.Reset(10, nil)
	ids := func(xs ...uint64) []Target {
		ts := make([]Target, len(xs))
		for i, x := range xs {
			ts[i] = Target{Cursor: x}
		}
		return ts
	}
	a := newPage(ids(11, 12, 15, 16))
	b := newPage(ids(20, 21, 22))
	p.addPage(a)
	p.addPage(b)
	p.addDone(Range{30, 40})
	c := newPage(ids(41, 45))
	p.addPage(c)
	if got := p.Commit(false); got.Cursor != 10 || !slices.Equal(got.Done, []Range{{30, 40}}) || !got.IsZero() {
		t.Fatalf("nothing finished: %+v", got)
	}
	a.finish(1, outSucceeded, nil)
	a.finish(2, outFailed, &Failure{Target: Target{Cursor: 15}, Code: codeUnavailable})
	a.finish(3, outCanceled, nil)
	b.finish(0, outSucceeded, nil)
	b.finish(2, outSucceeded, nil)
	c.finish(0, outSucceeded, nil)
	got := p.Commit(true) // resumable: the canceled 16 stays unfinished
	if got.Cursor != 10 || got.Succeeded != 4 || got.Failed != 1 || got.Canceled != 0 || len(got.Failures) != 1 || got.Errors[codeUnavailable] != 1 {
		t.Fatalf("resumable commit %+v", got)
	}
	if want := []Range{{12, 15}, {20, 20}, {22, 41}}; !slices.Equal(got.Done, want) {
		t.Fatalf("done %v, want %v", got.Done, want)
	}
	// Target by target, in read order, canceled ones left out.
	if want := []uint64{12, 20, 22, 41}; !slices.Equal(got.SucceededIDs, want) || got.Failures[0].Target.Cursor != 15 || len(got.CappedIDs) != 0 {
		t.Fatalf("succeeded ids %v, want %v; failed %d, want 15", got.SucceededIDs, want, got.Failures[0].Target.Cursor)
	}
	a.finish(0, outSucceeded, nil)
	b.finish(1, outSucceeded, nil)
	got = p.Commit(false)
	if got.Cursor != 41 || got.Succeeded != 2 || got.Canceled != 1 || len(got.Failures) != 0 || len(got.Done) != 0 {
		t.Fatalf("second commit %+v, want cursor 41 and 16 canceled", got)
	}
	if want := []uint64{11, 21}; !slices.Equal(got.SucceededIDs, want) {
		t.Fatalf("second commit's succeeded ids %v, want %v", got.SucceededIDs, want)
	}
	c.finish(1, outSucceeded, nil)
	if got = p.Commit(false); got.Cursor != 45 || got.Succeeded != 1 || len(p.segs) != 0 {
		t.Fatalf("last commit %+v with %d segments left", got, len(p.segs))
	}
}

func TestRetriesStopAtMaxAttempts(t *testing.T) {
	ts := makeTargets(50, func(i int) string { return fmt.Sprintf("down-%d", i) })
	s := &fakeSender{}
	c, err := runJob(context.Background(), t, testEngine(t, Config{MaxAttempts: 3}, s), Job{Source: &sliceSource{ts}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Failed != 50 || c.Errors[codeUnavailable] != 50 || len(c.Failures) != 50 {
		t.Fatalf("counts: %+v", c)
	}
	for _, f := range c.Failures {
		if f.Attempts != 3 || f.Code != codeUnavailable || f.Dead {
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
	// The first backoff (>= 1 s with RetryAfter-free full jitter of 2 s base) would
	// usually exceed a 1 ms total budget: every token fails after few attempts.
	e := testEngine(t, Config{MaxAttempts: 50, RetryBaseDelay: time.Second, RetryMaxDelay: time.Millisecond}, s)
	c, err := runJob(context.Background(), t, e, Job{Source: &sliceSource{ts}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Failed != 10 || s.total.Load() >= 50*10 {
		t.Fatalf("counts %+v sends %d", c, s.total.Load())
	}
}

func TestFatalStopsEarly(t *testing.T) {
	ts := makeTargets(20000, func(i int) string { return fmt.Sprintf("fatal-%d", i) })
	s := &fakeSender{}
	p := &Progress{}
	c, err := runJob(context.Background(), t, testEngine(t, Config{Concurrency: 16}, s), Job{Source: &sliceSource{ts}, Progress: p})
	var fatal *ErrFatal
	if !errors.As(err, &fatal) || fatal.Outcome.Code != codeThirdParty {
		t.Fatalf("err = %v, want ErrFatal THIRD_PARTY_AUTH_ERROR", err)
	}
	if s.total.Load() > 1000 {
		t.Fatalf("sent %d of 20000 after a fatal answer", s.total.Load())
	}
	if read := int64(p.Frontier.Load()); c.Succeeded+c.Failed+c.Canceled != read || c.Cursor != uint64(read) {
		t.Fatalf("counts do not add up to the %d targets read: %+v", read, c)
	}
	if c.Failed != s.total.Load() {
		t.Fatalf("failed %d != sends %d", c.Failed, s.total.Load())
	}
}

func TestCancelStopsTakingWork(t *testing.T) {
	ts := makeTargets(5000, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	s := &fakeSender{delay: 2 * time.Millisecond}
	p := &Progress{}
	ctx, cancel := context.WithCancelCause(context.Background())
	errCanceled := errors.New("canceled by admin")
	go func() {
		waitFor(t, "500 sends", func() bool { return s.total.Load() >= 500 })
		cancel(errCanceled)
	}()
	c, err := runJob(ctx, t, testEngine(t, Config{Concurrency: 32}, s), Job{Source: &sliceSource{ts}, Progress: p})
	if !errors.Is(err, errCanceled) {
		t.Fatalf("err = %v", err)
	}
	sent := s.total.Load()
	if read := int64(p.Frontier.Load()); c.Canceled == 0 || c.Succeeded+c.Failed+c.Canceled != read {
		t.Fatalf("counts %+v, %d read", c, read)
	}
	if c.Succeeded != sent {
		t.Fatalf("succeeded %d != sent %d: an in-flight send was lost", c.Succeeded, sent)
	}
}

func TestPanicInSenderIsAFailure(t *testing.T) {
	ts := makeTargets(10, func(i int) string { return fmt.Sprintf("panic-%d", i) })
	c, err := runJob(context.Background(), t, testEngine(t, Config{MaxAttempts: 2}, &fakeSender{}), Job{Source: &sliceSource{ts}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Failed != 10 || c.Errors[CodePanic] != 10 {
		t.Fatalf("counts: %+v", c)
	}
}

func TestSendTimeoutApplies(t *testing.T) {
	ts := makeTargets(8, func(i int) string { return fmt.Sprintf("hang-%d", i) })
	s := &fakeSender{}
	c, err := runJob(context.Background(), t, testEngine(t, Config{MaxAttempts: 2, SendTimeout: 50 * time.Millisecond}, s), Job{Source: &sliceSource{ts}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Failed != 8 || c.Errors[CodeTimeout] != 8 || s.total.Load() != 16 {
		t.Fatalf("counts: %+v sends %d", c, s.total.Load())
	}
}

func TestQuotaPausesEveryWorker(t *testing.T) {
	ts := makeTargets(600, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	s := &fakeSender{quotaWindow: 700 * time.Millisecond}
	c, err := runJob(context.Background(), t, testEngine(t, Config{Concurrency: 50, MaxAttempts: 10, RetryMaxDelay: time.Minute}, s), Job{Source: &sliceSource{ts}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Succeeded != 600 || c.Failed != 0 {
		t.Fatalf("counts: %+v", c)
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

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("timed out after 10s waiting for %s", what)
			return
		}
		time.Sleep(time.Millisecond)
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

func TestThrottlePauseBlocksUntilDeadline(t *testing.T) {
	th := NewThrottle(1000, 0, 0)
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

// A run stopped for a resume (shutdown, lost lease) commits every outcome
// it has, with no canceled target among them: the cursor plus the done
// ranges. Resuming from them sends every other target exactly once, and
// nothing already sent again.
func TestResumableCommitThenResumeCoversEveryTarget(t *testing.T) {
	const n = 3000
	ts := makeTargets(n, func(i int) string {
		if i%50 == 7 {
			return fmt.Sprintf("flaky-%d", i) // waits in the retry queue when the stop comes
		}
		return fmt.Sprintf("ok-%d", i)
	})
	s := &fakeSender{delay: time.Millisecond}
	p := &Progress{}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitFor(t, "700 sends", func() bool { return s.total.Load() >= 700 })
		cancel()
	}()
	e := testEngine(t, Config{Concurrency: 16, PageSize: 100, RetryBaseDelay: 50 * time.Millisecond}, s)
	_ = e.Run(ctx, Job{Message: &Message{}, Source: &sliceSource{ts}, Progress: p})
	c := p.Commit(true)
	if c.Canceled != 0 || c.Failed != 0 || c.Succeeded == 0 || len(c.Done) == 0 {
		t.Fatalf("resumable commit %+v: want successes only, some above the cursor", c)
	}
	var inRanges int64
	for _, r := range c.Done {
		inRanges += int64(r.Hi - r.Lo + 1) // targets are dense here
	}
	if c.Succeeded != int64(c.Cursor)+inRanges {
		t.Fatalf("%d successes, but the cursor %d and ranges cover %d", c.Succeeded, c.Cursor, int64(c.Cursor)+inRanges)
	}
	if again := p.Commit(true); !again.IsZero() || again.Cursor != c.Cursor {
		t.Fatalf("a second resumable commit moved on: %+v", again)
	}
	delivered := func() (n int64) {
		for _, tg := range ts {
			if s.count(tg.Token) > 0 && !strings.HasPrefix(tg.Token, "flaky-") {
				n++
			}
		}
		return n
	}
	if delivered() > c.Succeeded {
		t.Fatalf("%d delivered but %d committed: a finished send is missing from the commit", delivered(), c.Succeeded)
	}
	c2, err := runJob(context.Background(), t, e, Job{Source: &sliceSource{ts}, After: c.Cursor, Skip: c.Done})
	if err != nil {
		t.Fatal(err)
	}
	if c.Succeeded+c2.Succeeded != n || c2.Cursor != n {
		t.Fatalf("resume committed %+v after %+v", c2, c)
	}
	for _, tg := range ts {
		got, want := s.count(tg.Token), int64(1)
		if strings.HasPrefix(tg.Token, "flaky-") {
			if got < 1 {
				t.Fatalf("%s never sent", tg.Token)
			}
			continue
		}
		if got != want {
			t.Fatalf("%s sent %d times, want exactly once", tg.Token, got)
		}
	}
}

// A quota 429 with an absurd Retry-After pauses the engine for at most
// RetryMaxDelay, and the token, which cannot wait that long, fails.
func TestQuotaPauseIsCappedByRetryMaxDelay(t *testing.T) {
	s := &hourQuotaSender{}
	e := testEngine(t, Config{Concurrency: 2, RetryMaxDelay: 300 * time.Millisecond}, s)
	start := time.Now()
	ts := makeTargets(1, func(int) string { return "ok-0" })
	c, err := runJob(context.Background(), t, e, Job{Source: &sliceSource{ts}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Failed != 1 || c.Errors[CodeQuota] != 1 {
		t.Fatalf("counts %+v", c)
	}
	until := e.throttle.PausedUntil()
	if until.Sub(start) > time.Second {
		t.Fatalf("paused until %v after the start, want at most RetryMaxDelay", until.Sub(start))
	}
}

type hourQuotaSender struct{}

func (hourQuotaSender) Prepare(*Message) (Prepared, error) { return hourQuotaSender{}, nil }

func (hourQuotaSender) Send(context.Context, string, Budget) Outcome {
	return Outcome{Class: Transient, Code: CodeQuota, RetryAfter: time.Hour}
}

// switchGate is a Gate a test opens and closes.
type switchGate struct {
	mu     sync.Mutex
	closed bool
	opened chan struct{}
}

func (g *switchGate) set(closed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opened == nil {
		g.opened = make(chan struct{})
	}
	if g.closed && !closed {
		close(g.opened)
		g.opened = make(chan struct{})
	}
	g.closed = closed
}

func (g *switchGate) Open() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.closed
}

func (g *switchGate) Wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		closed, ch := g.closed, g.opened
		g.mu.Unlock()
		if !closed {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// A closed gate stops the run's sends at once, queued targets and those a
// worker holds included: only sends already started finish. Reopened, the
// run sends every target exactly once.
func TestClosedGateStopsSendsAtOnce(t *testing.T) {
	const n, conc = 5000, 16
	s := &fakeSender{delay: time.Millisecond}
	e := testEngine(t, Config{Concurrency: conc, PageSize: 100}, s)
	g := &switchGate{}
	g.set(false)
	done := make(chan Committed, 1)
	go func() {
		c, err := runJob(context.Background(), t, e, Job{Message: &Message{Title: "t"}, Source: &sliceSource{makeTargets(n, func(i int) string { return fmt.Sprintf("ok-%d", i) })}, Gate: g})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- c
	}()
	waitFor(t, "500 sends", func() bool { return s.total.Load() >= 500 })
	g.set(true)
	atClose := s.total.Load()
	// The window in which nothing new may start: long enough for a queued
	// target to be sent many times over at 1 ms a send.
	time.Sleep(200 * time.Millisecond)
	if sent := s.total.Load() - atClose; sent > conc {
		t.Fatalf("%d sends started after the gate closed, want at most the %d in flight", sent, conc)
	}
	g.set(false)
	select {
	case c := <-done:
		if c.Succeeded != n || s.total.Load() != n {
			t.Fatalf("succeeded %d, sends %d, want %d each", c.Succeeded, s.total.Load(), n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("timed out after 30s waiting for the run to finish once the gate reopened")
	}
}
