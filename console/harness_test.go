package console_test

// The browser tests drive the console in headless Chromium (Debian's
// chromium package) with chromedp, against the real pushfan binary
// (`pushfan serve`, built once in TestMain) on a database of its own and an
// FCM emulator in this process, so every count the page shows can be
// checked against what the emulator received.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jmoiron/sqlx"

	"pushfan/fcmemu"
	"pushfan/internal/devtools/demo"
	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

const (
	senderToken = "console-sender-token-0123456789"
	viewerToken = "console-viewer-token-0123456789"
)

var binary string // pushfan, built once for the package

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test skips (newEnv): no binary to build
	}
	dir, err := os.MkdirTemp("", "pushfan-console-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if binary, err = teststack.BuildPushfan("../cmd/pushfan", dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// chromium finds the browser: PUSHFAN_CHROMIUM, else Debian's. A missing
// browser fails the test (make test and .ci/run install it), never skips.
func chromium(t *testing.T) string {
	for _, p := range []string{os.Getenv("PUSHFAN_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found (PUSHFAN_CHROMIUM, /usr/bin/chromium): run scripts/ensure-chromium.sh (apt-get install chromium)")
	return ""
}

// env is one console under test: a database, an emulator, a pushfan
// process, and a headless browser tab.
type env struct {
	t   *testing.T
	db  *sqlx.DB
	emu *fcmemu.Emulator
	url string // the pushfan server
	ctx context.Context

	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
	allowed  []string // browser-log texts that are expected (an API's 4xx)
}

// newEnv seeds users (one token each, every 20th token dead), starts the
// server and a browser.
func newEnv(t *testing.T, users int, extraEnv ...string) *env {
	t.Helper()
	return newEnvWith(t, users, nil, extraEnv...)
}

// newEnvWith is newEnv with prepare run on the seeded database before the
// server starts: a column the configuration maps must be there when it
// checks its schema.
func newEnvWith(t *testing.T, users int, prepare func(db *sqlx.DB), extraEnv ...string) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("a browser test (Chromium, the pushfan binary): make test runs it, make test-short does not")
	}
	tdb := testdb.New(t)
	e := &env{t: t, db: tdb.SQL}
	e.emu = fcmemu.New(fcmemu.Config{Latency: 5 * time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	emuSrv := httptest.NewServer(e.emu.Handler())
	t.Cleanup(emuSrv.Close)
	if _, _, err := demo.New(tdb.SQL, nil).SeedDemo(t.Context(), demo.SeedOptions{Users: users, TokensPerUserMax: 1, DeadEvery: 20}); err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(tdb.SQL)
	}
	e.startServer(tdb.DSN, emuSrv.URL, extraEnv)
	e.startBrowser()
	return e
}

func (e *env) startServer(dsn, emuURL string, extraEnv []string) {
	env := append(os.Environ(),
		"PUSHFAN_MYSQL_DSN="+dsn,
		"PUSHFAN_FCM_ENDPOINT="+emuURL+"/v1",
		"PUSHFAN_FCM_PROJECT_ID=console-test",
		"PUSHFAN_ADMIN_TOKENS=ops:admin:"+senderToken+",watcher:viewer:"+viewerToken,
		"PUSHFAN_LOG_FORMAT=text",
	)
	e.url = teststack.StartServe(e.t, binary, "pushfan", append(env, extraEnv...)).URL
}

func (e *env) startBrowser() {
	t := e.t
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		// The console speaks the browser's language: tests read English
		// unless they choose Korean (localStorage 'pushfan.lang').
		chromedp.Flag("lang", "en-US"),
		chromedp.Env("LANGUAGE=en_US", "LANG=en_US.UTF-8"),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	// The first Do starts the browser, bound to the context it gets (a
	// timeout context would end the browser with it), so the deadline is
	// kept here.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			cancel()
			cancelAlloc()
			t.Fatalf("starting headless Chromium: %v", err)
		}
	case <-time.After(60 * time.Second):
		cancel()
		cancelAlloc()
		<-started
		t.Fatal("headless Chromium did not start within 60 s")
	}
	e.ctx = ctx
	messages := chromedp.Console(ctx)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for m, err := range messages {
			if err != nil {
				return // the tab has closed
			}
			e.mu.Lock()
			e.messages = append(e.messages, m)
			e.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		<-collected
	})
	t.Cleanup(e.checkConsole) // runs first: the tab is still open
}

// expectBrowserError declares a browser-log line the test causes on
// purpose (Chromium logs every 4xx answer a fetch gets as an error), by
// a part of its text or of its URL.
func (e *env) expectBrowserError(substr string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.allowed = append(e.allowed, substr)
}

// checkConsole fails the test on any error or warning in the page's
// console: an exception, console.error/warn, or a browser-log entry the
// test did not expect.
func (e *env) checkConsole() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.messages {
		if m.Type != chromedp.ConsoleError && m.Type != chromedp.ConsoleWarning && m.Type != chromedp.ConsoleException {
			continue
		}
		expected := false
		for _, a := range e.allowed {
			expected = expected || (m.Source == "network" && (strings.Contains(m.Text, a) || strings.Contains(m.URL, a)))
		}
		if !expected {
			e.t.Errorf("browser console %s (source %q) at %s:%d: %s", m.Type, m.Source, m.URL, m.Line+1, m.Text)
		}
	}
}

// do runs actions within a deadline; on failure it says what it was doing.
func (e *env) do(what string, within time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, within)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		e.shot("failed")
		e.t.Fatalf("%s (within %s): %v", what, within, err)
	}
}

// eval evaluates a JavaScript expression (promises awaited) and decodes it.
func eval[T any](e *env, what, js string) T {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		e.t.Fatalf("%s: evaluating %s: %v", what, js, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it is true.
func (e *env) waitFor(what string, within time.Duration, js string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, within+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		e.shot("failed")
		e.t.Fatalf("waiting for %s (within %s; condition %s): %v", what, within, js, err)
	}
}

// page waits until the console shows page name (body[data-page]).
func (e *env) page(name string) {
	e.t.Helper()
	e.waitFor("the "+name+" page", 20*time.Second, fmt.Sprintf(`document.body.dataset.page === %q`, name))
}

// signIn opens the console and signs in with token.
func (e *env) signIn(token string) {
	e.t.Helper()
	e.do("opening the console", 30*time.Second, chromedp.Navigate(e.url+"/"))
	e.page("signin")
	// By keyboard, as a person would: type the token, press Enter.
	e.do("signing in", 20*time.Second, chromedp.SendKeys(chromedp.CSS("#signin-token"), token+"\r"))
	e.page("dashboard")
}

// go navigates the page to a hash route.
func (e *env) route(hash string) {
	e.t.Helper()
	eval[bool](e, "routing to "+hash, fmt.Sprintf(`(location.hash = %q, true)`, hash))
}

// setValue sets an input's value as a user would, firing input and change.
func (e *env) setValue(sel, value string) {
	e.t.Helper()
	js := fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false;
		el.value = %q; el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); return true })()`, sel, value)
	if !eval[bool](e, "setting "+sel, js) {
		e.shot("failed")
		e.t.Fatalf("no element %s to set", sel)
	}
}

// click clicks an element by selector, as a person would: once the page
// has stopped scrolling. The console scrolls smoothly to a field error
// (fielderrors.js); a click computed mid-scroll lands where the element
// was, not where it is.
func (e *env) click(sel string) {
	e.t.Helper()
	eval[bool](e, "waiting for the page to stop scrolling before clicking "+sel, `new Promise((done) => {
		let last = -1, still = 0;
		const tick = () => {
			const y = window.scrollY;
			still = y === last ? still + 1 : 0;
			last = y;
			if (still >= 3) done(true); else requestAnimationFrame(tick);
		};
		tick();
	})`)
	e.do("clicking "+sel, 20*time.Second, chromedp.Click(chromedp.CSS(sel)))
}

// count is the integer in an element's data-value.
func (e *env) count(sel string) int64 {
	e.t.Helper()
	return eval[int64](e, "reading "+sel, fmt.Sprintf(`Number(document.querySelector(%q).dataset.value)`, sel))
}

// shot saves a screenshot of the whole page as a test artifact:
// artifacts/console/<Test>[-suffix].png at the repository's root (or
// under PUSHFAN_ARTIFACTS).
func (e *env) shot(suffix string) string {
	dir := os.Getenv("PUSHFAN_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "artifacts")
	}
	dir = filepath.Join(dir, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Errorf("screenshot dir: %v", err)
		return ""
	}
	name := strings.ReplaceAll(e.t.Name(), "/", "_")
	if suffix != "" {
		name += "-" + suffix
	}
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	// Let the progress bar's transition end: the picture shows the state.
	_, _ = chromedp.Run(ctx, chromedp.Poll[bool](`document.getAnimations().every((a) => a.playState !== 'running')`, chromedp.WithPollingTimeout(2*time.Second)))
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		e.t.Errorf("screenshot: %v", err)
		return ""
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		e.t.Errorf("screenshot: %v", err)
	}
	e.t.Logf("screenshot: %s", path)
	return path
}

// eligibleTokens counts the tokens a broadcast to all would target.
func (e *env) eligibleTokens() int64 {
	var n int64
	if err := e.db.Get(&n, `SELECT COUNT(*) FROM device_tokens t JOIN users u ON u.id = t.user_id WHERE t.invalidated_at IS NULL AND u.push_enabled = 1`); err != nil {
		e.t.Fatal(err)
	}
	return n
}
