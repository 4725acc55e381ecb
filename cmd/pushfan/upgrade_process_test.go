//go:build !race

package main

// The rolling-upgrade drill (issue 38, part 4): the previous release, built
// from a fixed commit, sends a broadcast; this checkout starts beside it
// against the same database and migrates it while the old one still sends;
// a second broadcast goes to the new release; then the old instance is
// stopped, once by SIGTERM and once by kill -9. Both broadcasts must end
// completed, with counts equal to what the emulator delivered.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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

	"pushfan/fcmemu"
	"pushfan/internal/devtools/demo"
	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

// previousRelease is the release the drill upgrades from: the last commit
// with 13 migrations, before 00014 (de5ec11, plans in steps) added the
// broadcasts' open_chunks counter that the old release never keeps. When a
// later migration of this wave lands, the drill keeps starting from here:
// the oldest schema a deployment may still run beside the checkout.
const (
	previousRelease = "e2fb1a7fc441fd1d1c793def394447805b161ba9"
	previousSchema  = 13
)

// upgradeTargets is the audience: three chunks of 10,000 and one
// of 4,200 at the default chunk width, all four run at once by the old
// instance (4 chunks per instance).
const upgradeTargets = 34200

// previousBinary builds previousRelease once for the package's tests.
var previousBinary = sync.OnceValues(func() (string, error) {
	return buildRelease(previousRelease, filepath.Join(binDir, "previous"))
})

// buildRelease builds `pushfan` at commit into dir: the commit's tree is
// exported with git archive (the checkout and its worktrees are left as
// they are) and built there, sharing the module and build caches. A clone
// without the commit (a shallow one) is an error that says how to get it:
// the drill must not pass by skipping.
func buildRelease(commit, dir string) (string, error) {
	root, err := exec.Command("git", "-C", "../..", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("the upgrade drill builds release %s from git history, and this is no git checkout: %w", commit, err)
	}
	top := strings.TrimSpace(string(root))
	if out, err := exec.Command("git", "-C", top, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		shallow, _ := exec.Command("git", "-C", top, "rev-parse", "--is-shallow-repository").Output()
		return "", fmt.Errorf("the upgrade drill builds the previous release from commit %s, which this clone does not have "+
			"(shallow clone: %s). Fetch the history first: git fetch --unshallow (or git fetch origin %s). git cat-file: %v %s",
			commit, strings.TrimSpace(string(shallow)), commit, err, out)
	}
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := filepath.Join(dir, "src.tar")
	if out, err := exec.Command("git", "-C", top, "archive", "--format=tar", "-o", archive, commit).CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %w\n%s", commit, err, out)
	}
	if out, err := exec.Command("tar", "-xf", archive, "-C", src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("unpacking %s: %w\n%s", archive, err, out)
	}
	bin := filepath.Join(dir, "pushfan")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "./cmd/pushfan")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building release %s: %w\n%s", commit, err, out)
	}
	return bin, nil
}

func TestRollingUpgradeFromThePreviousRelease(t *testing.T) {
	start := time.Now()
	old, err := previousBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("previous release %s built in %v", previousRelease[:7], time.Since(start).Round(time.Second))
	for _, stop := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGTERM", syscall.SIGTERM}, {"kill-9", syscall.SIGKILL}} {
		t.Run(stop.name, func(t *testing.T) { upgradeDrill(t, old, stop.sig) })
	}
}

func upgradeDrill(t *testing.T, oldBin string, stop syscall.Signal) {
	began := time.Now()
	tdb := testdb.NewAt(t, previousSchema)
	// The bundled schema's contract columns only: what any release seeds.
	tdb.SQL.MustExec(fmt.Sprintf("INSERT INTO users (id) SELECT seq FROM seq_1_to_%d", upgradeTargets))
	tdb.SQL.MustExec(fmt.Sprintf("INSERT INTO device_tokens (user_id, token) SELECT seq, CONCAT('tok-', seq, '-1') FROM seq_1_to_%d ORDER BY seq", upgradeTargets))

	emu := fcmemu.New(fcmemu.Config{Latency: 30 * time.Millisecond, Jitter: 5 * time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	rec := newSendRecorder(emu.Handler())
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	env := append(os.Environ(),
		"PUSHFAN_MYSQL_DSN="+tdb.DSN,
		"PUSHFAN_FCM_PROJECT_ID=process-test",
		"PUSHFAN_ADMIN_TOKENS="+procToken,
		"PUSHFAN_LOG_FORMAT=text",
	)
	// The old instance runs at the defaults but for its send timeout: its
	// sends wait at the emulator's door while the new release migrates, and
	// on a loaded machine a migration outlasts the default 10 s (a send
	// that timed out is tried again and may fail for good, which would
	// only blur what the drill looks at).
	var envOld, envNew []string
	envOld = append(append(envOld, env...), "PUSHFAN_FCM_ENDPOINT="+srv.URL+"/previous/v1", "PUSHFAN_INSTANCE_ID=previous", "PUSHFAN_SEND_TIMEOUT=5m")
	envNew = append(append(envNew, env...), "PUSHFAN_FCM_ENDPOINT="+srv.URL+"/v1", "PUSHFAN_INSTANCE_ID=current")
	e := &procEnv{t: t, pool: tdb.SQL, emu: emu, n: upgradeTargets}

	const before, after = "before the upgrade", "after the upgrade"
	oldP := teststack.StartServe(t, oldBin, "previous", envOld)
	b1 := e.call(oldP.URL, "POST", "/push/broadcast?wait=0", `{"title":"`+before+`","body":"b","audience":{"all":true}}`)
	if b1.ID == 0 {
		t.Fatalf("the previous release did not take the broadcast: %+v", b1)
	}
	// The old instance runs all four chunks; it is mid-broadcast when the
	// new release migrates: its sends wait at the emulator's door meanwhile.
	const within = 3 * time.Minute // every wait's deadline, for a loaded machine
	waitFor(t, "the previous release to send 3,000 targets with all 4 chunks leased", within, func() bool {
		return rec.accepted(before) >= 3000 && chunkStatuses(t, e, b1.ID)["leased"] == 4
	})
	rec.hold("previous")
	migrateAt := time.Now()
	newP := teststack.StartServeWithin(t, binary, "current", envNew, within) // migrates at start
	var version int64
	if err := tdb.SQL.Get(&version, "SELECT MAX(version_id) FROM goose_db_version"); err != nil {
		t.Fatal(err)
	}
	if version <= previousSchema {
		t.Fatalf("the new release left the schema at version %d", version)
	}
	rec.release("previous")
	migrated := time.Since(migrateAt)
	// A chunk the old instance ends after the migration ends without the
	// bookkeeping the new schema keeps (open_chunks): the strand.
	// (Should the database stall past a lease, the new release may take a
	// chunk over and end it first: the drill goes on, and says so.)
	waitFor(t, "a chunk of the first broadcast to end after the migration", within, func() bool {
		return chunkStatuses(t, e, b1.ID)["done"] >= 1
	})
	rec.hold("previous")
	st := chunkStatuses(t, e, b1.ID)
	if st["done"] == 4 {
		t.Fatalf("every chunk of the first broadcast ended (%v) before the old instance was stopped: the drill missed its window", st)
	}
	var endedByOld int
	if err := tdb.SQL.Get(&endedByOld, "SELECT COUNT(*) FROM broadcast_chunks WHERE broadcast_id = ? AND status = 'done' AND done_by = 'previous'", b1.ID); err != nil {
		t.Fatal(err)
	}
	b2 := e.call(newP.URL, "POST", "/push/broadcast?wait=0", `{"title":"`+after+`","body":"b","audience":{"all":true}}`)
	if b2.ID == 0 {
		t.Fatalf("the new release did not take the broadcast: %+v", b2)
	}
	waitFor(t, "the new release to send a tenth of the second broadcast", within, func() bool {
		return rec.accepted(after) >= upgradeTargets/10
	})
	// A deploy stops the old instance while it sends (its sends in flight
	// finish, and it hands its chunks back); a kill -9 while its sends
	// wait at the door, which they never pass.
	if stop == syscall.SIGTERM {
		rec.release("previous")
	}
	if err := oldP.Cmd.Process.Signal(stop); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	oldP.WaitExit(t, stop.String())
	rec.release("previous")
	if stop == syscall.SIGTERM && oldP.ExitErr != nil {
		t.Fatalf("SIGTERM: the previous release exited with %v, want 0", oldP.ExitErr)
	}
	var dups [2]int64
	for i, b := range []struct {
		id    uint64
		title string
	}{{b1.ID, before}, {b2.ID, after}} {
		final := waitFinal(t, e, newP.URL, b.id, within)
		dups[i] = rec.verify(t, final, b.title, upgradeTargets)
	}
	rec.checkAgainst(t, emu, upgradeTargets)
	t.Logf("%s: the previous release ended %d of 4 chunks after the migration (%v to start and migrate the new release), was stopped %v into the drill; "+
		"both broadcasts completed exactly %v after the stop (duplicates %d and %d); broadcasts repaired by the new release: %s",
		stop, endedByOld, migrated.Round(time.Millisecond), stopped.Sub(began).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond),
		dups[0], dups[1], metricValue(t, newP.URL, "pushfan_broadcasts_repaired_total"))
}

// waitFinal polls the broadcast until it is final; a broadcast still open
// at the deadline fails the test with its row and chunk rows.
func waitFinal(t *testing.T, e *procEnv, base string, id uint64, within time.Duration) broadcastView {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b := e.call(base, "GET", fmt.Sprintf("/push/broadcasts/%d", id), "")
		if b.Status == "completed" || b.Status == "failed" || b.Status == "canceled" {
			return b
		}
		if time.Now().After(deadline) {
			var open int64
			_ = e.pool.Get(&open, "SELECT open_chunks FROM broadcasts WHERE id = ?", id)
			t.Fatalf("broadcast %d still %s %v after the stop: %d succeeded of %d targeted, chunk rows %v, open_chunks %d",
				id, b.Status, within, b.Succeeded, b.Targeted, chunkStatuses(t, e, id), open)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// chunkStatuses counts a broadcast's chunk rows by status.
func chunkStatuses(t *testing.T, e *procEnv, id uint64) map[string]int {
	t.Helper()
	rows, err := e.pool.Query("SELECT status, COUNT(*) FROM broadcast_chunks WHERE broadcast_id = ? GROUP BY status", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor polls cond every 5 ms until it holds, failing the test after
// within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// metricValue reads one unlabelled sample from an instance's /metrics
// ("absent" when it is not there).
func metricValue(t *testing.T, base, name string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+procToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return "absent"
}

// sendRecorder stands in front of the emulator: it counts the sends the
// emulator accepted by message title and token (two broadcasts to the same
// tokens are told apart by their titles), and holds the sends of the
// instances whose endpoint carries a given path prefix (/previous/v1) at
// its door while asked to.
type sendRecorder struct {
	next http.Handler

	mu       sync.Mutex
	byTitle  map[string]map[string]int64
	total    map[string]int64
	closedTo map[string]chan struct{} // prefix → closed when its sends may go on
}

func newSendRecorder(next http.Handler) *sendRecorder {
	return &sendRecorder{next: next, byTitle: map[string]map[string]int64{}, total: map[string]int64{}, closedTo: map[string]chan struct{}{}}
}

// hold makes the sends under /prefix/ wait until release.
func (s *sendRecorder) hold(prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closedTo[prefix] == nil {
		s.closedTo[prefix] = make(chan struct{})
	}
}

// release lets the sends under /prefix/ through again.
func (s *sendRecorder) release(prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.closedTo[prefix]; ch != nil {
		close(ch)
		delete(s.closedTo, prefix)
	}
}

func (s *sendRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if prefix, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); ok && prefix != "v1" && prefix != "emulator" {
		s.mu.Lock()
		door := s.closedTo[prefix]
		s.mu.Unlock()
		if door != nil {
			select {
			case <-door:
			case <-r.Context().Done():
				return // the instance is gone: nothing reached FCM
			}
		}
		r.URL.Path, r.URL.RawPath = "/"+rest, ""
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sw := &statusWriter{ResponseWriter: w}
	s.next.ServeHTTP(sw, r)
	if sw.status != http.StatusOK || !strings.HasSuffix(r.URL.Path, ":send") {
		return
	}
	var m struct {
		ValidateOnly bool `json:"validate_only"`
		Message      struct {
			Token        string `json:"token"`
			Notification struct {
				Title string `json:"title"`
			} `json:"notification"`
		} `json:"message"`
	}
	if json.Unmarshal(body, &m) != nil || m.ValidateOnly {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	byToken := s.byTitle[m.Message.Notification.Title]
	if byToken == nil {
		byToken = map[string]int64{}
		s.byTitle[m.Message.Notification.Title] = byToken
	}
	byToken[m.Message.Token]++
	s.total[m.Message.Notification.Title]++
}

// accepted is how many sends of the title the emulator accepted.
func (s *sendRecorder) accepted(title string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total[title]
}

// verify checks a final broadcast against the sends of its title token by
// token, as procEnv.verify does, and returns the duplicates.
func (s *sendRecorder) verify(t *testing.T, b broadcastView, title string, n int) (dups int64) {
	t.Helper()
	if b.Status != "completed" || b.Targeted != int64(n) || b.Succeeded+b.Failed != int64(n) || b.Canceled != 0 {
		t.Fatalf("broadcast %d (%q) ended %+v, want %d completed", b.ID, title, b, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var delivered, missing int64
	for uid := 1; uid <= n; uid++ {
		c := s.byTitle[title][demo.SeedTokenName(uint64(uid), 1, false)]
		if c == 0 {
			missing++
			continue
		}
		delivered++
		dups += c - 1
	}
	if delivered != b.Succeeded || missing != b.Failed {
		t.Fatalf("broadcast %d (%q): %d tokens delivered vs succeeded %d, %d never delivered vs failed %d", b.ID, title, delivered, b.Succeeded, missing, b.Failed)
	}
	return dups
}

// checkAgainst checks that the recorder saw every send the emulator
// accepted, so that its counts by title are the emulator's.
func (s *sendRecorder) checkAgainst(t *testing.T, emu *fcmemu.Emulator, n int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid := 1; uid <= n; uid++ {
		tok := demo.SeedTokenName(uint64(uid), 1, false)
		var sum int64
		for _, byToken := range s.byTitle {
			sum += byToken[tok]
		}
		if got := emu.Counts(tok).Accepted; got != sum {
			t.Fatalf("token %s: the emulator accepted %d sends, the recorder saw %d", tok, got, sum)
		}
	}
}
