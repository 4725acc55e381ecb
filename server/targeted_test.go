package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// A paced "all" is counted as fast as any other: its pace decides when its
// sends go out, not when its audience is counted. 300,000 tokens at
// max_rate 50 have their exact targeted (every eligible token, which the
// plan's chunks hold) while a handful have been sent; the plan before this
// rested beside its own paced sends as if they were starved of CPU, and
// ran at a tenth of its speed.
func TestAPacedAllIsCountedWhileOnlyAFewAreSent(t *testing.T) {
	const users = 150000
	s := teststack.New(t, teststack.Options{CaptureLogs: true, Configure: func(c *config.Config) {
		c.Engine.RateLimit = 2000 // the plan is ahead of its sends after 10,000 targets
	}})
	n := int64(s.SeedZoned(users, 2, nil))
	s.MustExec("UPDATE device_tokens SET invalidated_at = UTC_TIMESTAMP(6) WHERE id % 10 = 3")
	s.MustExec("UPDATE users SET push_enabled = 0 WHERE id % 100 = 7")
	var eligible int64
	if err := s.SQL.Get(&eligible, `SELECT COUNT(*) FROM device_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.invalidated_at IS NULL AND u.push_enabled = 1`); err != nil {
		t.Fatal(err)
	}
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "paced", "audience": map[string]any{"all": true}, "max_rate": 50}, &b); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %+v", resp.StatusCode, b)
	}
	planned := s.WaitPlanned(b.ID, 2*time.Minute)
	sent := planned.Succeeded + planned.Failed + planned.Canceled + planned.Capped
	took := planned.PlannedAt.Sub(planned.CreatedAt)
	t.Logf("%d of %d tokens targeted after %v, %d sent by then", planned.Targeted, n, took.Round(time.Millisecond), sent)
	if planned.Final() || planned.Targeted != eligible {
		t.Fatalf("planned: %+v, want running with all %d eligible tokens targeted", planned, eligible)
	}
	var inChunks int64
	if err := s.SQL.Get(&inChunks, "SELECT COALESCE(SUM(targets), 0) FROM broadcast_chunks WHERE broadcast_id = ?", b.ID); err != nil {
		t.Fatal(err)
	}
	if inChunks != eligible {
		t.Fatalf("the chunks hold %d targets, targeted is %d", inChunks, eligible)
	}
	// The plan never yielded to its own paced sends (it did for 9 times
	// as long as it read, before): its log line says how long it rested.
	line := planLog(t, s, b.ID)
	planTook, rested := logDuration(t, line, "took"), logDuration(t, line, "rested")
	t.Logf("the plan took %v and rested %v of it", planTook, rested)
	if rested > planTook/5 {
		t.Fatalf("the plan rested %v of its %v beside its own pace", rested, planTook)
	}
	// A handful: at 50/s, 25 s of sends.
	if sent > 50*25 {
		t.Fatalf("%d sent before the audience was counted (after %v): the plan waited for the pace", sent, took)
	}
	var c teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcasts/"+itoa(b.ID)+"/cancel", nil, &c); resp.StatusCode != http.StatusOK || c.Status != "canceled" ||
		c.Targeted != eligible || c.Succeeded+c.Failed+c.Canceled+c.Capped != c.Targeted {
		t.Fatalf("cancel: %d %+v", resp.StatusCode, c)
	}
}

// planLog is the "broadcast planned" log line of broadcast id.
func planLog(t *testing.T, s *teststack.Stack, id uint64) map[string]any {
	t.Helper()
	for _, l := range strings.Split(s.LogText(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil || m["msg"] != "broadcast planned" {
			continue
		}
		if bid, _ := m["broadcast_id"].(float64); uint64(bid) == id {
			return m
		}
	}
	t.Fatalf("no \"broadcast planned\" log line for broadcast %d", id)
	return nil
}

// logDuration reads a duration attribute of a JSON log line (nanoseconds,
// or Go's text form).
func logDuration(t *testing.T, m map[string]any, key string) time.Duration {
	t.Helper()
	switch v := m[key].(type) {
	case float64:
		return time.Duration(v)
	case string:
		d, err := time.ParseDuration(v)
		if err == nil {
			return d
		}
	}
	t.Fatalf("log line %v: %s is no duration", m, key)
	return 0
}
