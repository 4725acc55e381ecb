package server_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// deadOfPopulation counts the eligible members of appPopulation whose
// token is dead by dead, and the other eligible ones.
func deadOfPopulation(eligible map[int]bool, dead func(int) bool) (wantDead, wantAlive int64) {
	for i, ok := range eligible {
		switch {
		case ok && dead(i):
			wantDead++
		case ok:
			wantAlive++
		}
	}
	return wantDead, wantAlive
}

// scrapeSum adds up a metric over instances' /metrics.
func scrapeSum(t *testing.T, s *teststack.Stack, name string, insts ...*teststack.Instance) float64 {
	t.Helper()
	var sum float64
	for _, in := range insts {
		sum += scrape(t, s.HTTP, in.API.URL+"/metrics", teststack.AdminToken)[name]
	}
	return sum
}

// waitFinishedOrResent is WaitFinished, failing after within with how many
// of toks the emulator got more than once (what takeovers re-send).
func waitFinishedOrResent(t *testing.T, s *teststack.Stack, id uint64, within time.Duration, toks map[int]string) teststack.Broadcast {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var b teststack.Broadcast
		s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", id), nil, &b)
		if b.Final() {
			return b
		}
		if time.Now().After(deadline) {
			var resent, sends int64
			for _, tok := range toks {
				n := s.Emu.Counts(tok).Attempts
				sends += n
				if n > 1 {
					resent++
				}
			}
			t.Fatalf("broadcast %d still %s after %v (%d succeeded, %d failed): %d tokens sent more than once, %d sends to %d tokens",
				id, b.Status, within, b.Succeeded, b.Failed, resent, sends, len(toks))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An on_dead the app's table always refuses (here a trigger; a revoked
// grant or a dropped column fail the same way) used to make a checkpoint
// that could never commit: the lease lapsed, every takeover re-sent the
// same window, and the chunk never ended. Now each checkpoint is retried
// with backoff, then stored without the write-back: the broadcast
// completes with every token sent once, the failures stored, and the
// skipped write-backs counted on the broadcast and in the metric, and
// logged by token id and prefix.
func TestSchemaMappingOnDeadAlwaysFails(t *testing.T) {
	t.Parallel()
	s, db := mappedStackWith(t, teststack.Options{CaptureLogs: true}, func(c *config.Config, _ string) {
		c.Engine.ChunkWidth = 10
		c.Engine.Lease = 3 * time.Second // well above the write-back's retries, short enough for a takeover to show
	})
	second := s.AddInstance()
	dead := func(i int) bool { return i%3 == 0 }
	toks, eligible := appPopulation(s, db, "refused-", 60, dead)
	wantDead, wantAlive := deadOfPopulation(eligible, dead)
	s.MustExec("CREATE TRIGGER " + db + ".push_devices_read_only BEFORE UPDATE ON " + db + ".push_devices FOR EACH ROW " +
		"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'push_devices is read-only'")

	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}, "wait": false}, &b); resp.StatusCode != 202 {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	b = waitFinishedOrResent(t, s, b.ID, 30*time.Second, toks)
	if b.Status != "completed" || b.Targeted != wantDead+wantAlive || b.Succeeded != wantAlive || b.Failed != wantDead ||
		b.Errors["UNREGISTERED"] != wantDead || b.InvalidatedTokens != 0 || b.WriteBackFailures != wantDead {
		t.Fatalf("broadcast %+v: want completed, %d succeeded, %d failed UNREGISTERED, none invalidated and %d write-back failures",
			b, wantAlive, wantDead, wantDead)
	}
	if b.Chunks == nil || b.Chunks.Chunks < 5 || b.Chunks.Takeovers != 0 {
		t.Fatalf("chunks %+v: want several, none taken over", b.Chunks)
	}
	for i, tok := range toks {
		if got, w := s.Emu.Counts(tok).Attempts, map[bool]int64{true: 1}[eligible[i]]; got != w {
			t.Errorf("member %d (%s): %d sends, want %d", i, tok, got, w)
		}
	}
	var page struct {
		Failures []struct {
			TokenID uint64 `json:"token_id"`
		} `json:"failures"`
	}
	if resp := s.Do("GET", fmt.Sprintf("/push/broadcasts/%d/failures", b.ID), nil, &page); resp.StatusCode != 200 || int64(len(page.Failures)) != wantDead {
		t.Fatalf("failures: %d, %d rows, want %d", resp.StatusCode, len(page.Failures), wantDead)
	}
	var written int64
	if err := s.SQL.Get(&written, "SELECT COUNT(*) FROM "+db+".push_devices WHERE dead_code IS NOT NULL"); err != nil || written != 0 {
		t.Fatalf("%d rows written back through a read-only table (%v)", written, err)
	}
	if got := scrapeSum(t, s, "pushfan_writeback_failures_total", s.First, second); got != float64(wantDead) {
		t.Fatalf("pushfan_writeback_failures_total %v over both instances, want %d", got, wantDead)
	}
	if got := scrapeSum(t, s, `pushfan_chunk_claims_total{takeover="true"}`, s.First, second); got != 0 {
		t.Fatalf("%v takeovers", got)
	}

	// One log line per skipped token, with its id and a prefix; no whole
	// token anywhere.
	logs := s.LogText()
	skipped := map[string]int{}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"msg":"dead token not written back`) {
			m := regexp.MustCompile(`"token_id":(\d+)`).FindStringSubmatch(line)
			if m == nil || !strings.Contains(line, `"token":"unregist`) || !strings.Contains(line, "push_devices is read-only") {
				t.Fatalf("skip line without the token id, a token prefix or the error: %s", line)
			}
			skipped[m[1]]++
		}
	}
	if int64(len(skipped)) != wantDead {
		t.Fatalf("%d tokens logged as not written back (%v), want %d", len(skipped), skipped, wantDead)
	}
	for id, n := range skipped {
		if n != 1 {
			t.Errorf("token %s logged %d times, want once", id, n)
		}
	}
	for _, tok := range toks {
		if regexp.MustCompile(regexp.QuoteMeta(tok) + `\D`).MatchString(logs) {
			t.Fatalf("token %s appears whole in the logs", tok)
		}
	}
}

// A write-back the app's table refuses twice per token, then accepts, is
// retried until it is stored: every dead token is written back and none is
// counted as a write-back failure.
func TestSchemaMappingOnDeadRetriedThroughTransientFailures(t *testing.T) {
	t.Parallel()
	s, db := mappedStack(t, func(c *config.Config, _ string) { c.Engine.ChunkWidth = 10 })
	dead := func(i int) bool { return i%3 == 0 }
	toks, eligible := appPopulation(s, db, "flaky-wb-", 40, dead)
	wantDead, wantAlive := deadOfPopulation(eligible, dead)
	// The refusals are counted in a MyISAM table, which no rollback undoes.
	s.MustExec("CREATE TABLE " + db + ".wb_refusals (device_seq BIGINT UNSIGNED NOT NULL PRIMARY KEY, n INT NOT NULL) ENGINE=MyISAM")
	s.MustExec("CREATE TRIGGER " + db + ".push_devices_flaky BEFORE UPDATE ON " + db + ".push_devices FOR EACH ROW BEGIN " +
		"IF COALESCE((SELECT n FROM " + db + ".wb_refusals WHERE device_seq = NEW.device_seq), 0) < 2 THEN " +
		"INSERT INTO " + db + ".wb_refusals VALUES (NEW.device_seq, 1) ON DUPLICATE KEY UPDATE n = n + 1; " +
		"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'not now'; END IF; END")

	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}, "wait": false}, &b); resp.StatusCode != 202 {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	b = s.WaitFinished(b.ID, 30*time.Second)
	if b.Status != "completed" || b.Succeeded != wantAlive || b.Failed != wantDead || b.InvalidatedTokens != wantDead || b.WriteBackFailures != 0 {
		t.Fatalf("broadcast %+v: want %d succeeded, %d failed and invalidated, no write-back failure", b, wantAlive, wantDead)
	}
	var refusals, written int64
	if err := s.SQL.Get(&refusals, "SELECT COALESCE(SUM(n), 0) FROM "+db+".wb_refusals"); err != nil || refusals != 2*wantDead {
		t.Fatalf("%d refusals (%v), want 2 per dead token (%d)", refusals, err, 2*wantDead)
	}
	if err := s.SQL.Get(&written, "SELECT COUNT(*) FROM "+db+".push_devices WHERE deleted_yn = 'Y' AND dead_code = 'UNREGISTERED'"); err != nil || written != wantDead {
		t.Fatalf("%d tokens written back (%v), want %d", written, err, wantDead)
	}
	m := scrape(t, s.HTTP, s.API.URL+"/metrics", teststack.AdminToken)
	if m["pushfan_writeback_failures_total"] != 0 || m["pushfan_checkpoint_failures_total"] < 1 {
		t.Fatalf("metrics: %v write-back failures, %v checkpoint failures; want none and some (the refused attempts)",
			m["pushfan_writeback_failures_total"], m["pushfan_checkpoint_failures_total"])
	}
	for i, tok := range toks {
		if got, w := s.Emu.Counts(tok).Attempts, map[bool]int64{true: 1}[eligible[i]]; got != w {
			t.Errorf("member %d (%s): %d sends, want %d", i, tok, got, w)
		}
	}
}
