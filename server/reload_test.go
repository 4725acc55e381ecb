package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

const reloadPageSQL = "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after AND t.id <= :upto %s ORDER BY t.id LIMIT :limit"

// reloadAudiencesYAML is a config file of named audiences: name → the
// condition its SQL adds.
func reloadAudiencesYAML(auds ...[2]string) string {
	var b strings.Builder
	b.WriteString("frequency_caps:\n  marketing: 5/day\naudiences:\n")
	for _, a := range auds {
		b.WriteString("  - name: " + a[0] + "\n    sql: \"" + strings.Replace(reloadPageSQL, "%s", a[1], 1) + "\"\n")
	}
	return b.String()
}

// reloadStack is a stack started on file's audiences and caps as serve
// loads them (the rest of its configuration is the stack's), with its
// logs captured.
func reloadStack(t *testing.T, file string, configure func(*config.Config)) *teststack.Stack {
	return teststack.New(t, teststack.Options{
		CaptureLogs: true,
		Configure: func(c *config.Config) {
			// Load complains of the settings the environment lacks here:
			// only the file's part is taken.
			loaded, err := config.Load(func(k string) (string, bool) {
				if k == "PUSHFAN_CONFIG" {
					return file, true
				}
				return "", false
			})
			if loaded.File != file || len(loaded.Audiences) == 0 {
				t.Fatalf("loading the file: %+v %v", loaded.Audiences, err)
			}
			c.File, c.Audiences, c.FrequencyCaps = loaded.File, loaded.Audiences, loaded.FrequencyCaps
			configure(c)
		},
	})
}

// POST /push/audiences/reload reads the file's audiences again: a new
// one is listed and a broadcast to it reaches exactly its tokens; a
// broken file answers 422 with every problem and the old set stays; a
// viewer may not reload.
func TestReloadingTheNamedAudiences(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "pushfan.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	everyone := [2]string{"everyone", ""}
	write(reloadAudiencesYAML(everyone))
	s := reloadStack(t, file, func(c *config.Config) { c.AdminTokens = append(c.AdminTokens, "dashboard:viewer:"+viewerToken) })
	toks := []string{"reload-1", "reload-2", "reload-3", "reload-4"}
	s.SeedTokens(1, toks)
	names := func() []string {
		var out struct {
			Named []struct {
				Name string `json:"name"`
			} `json:"named"`
		}
		if resp := s.Do("GET", "/push/audiences", nil, &out); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /push/audiences: %d", resp.StatusCode)
		}
		var n []string
		for _, a := range out.Named {
			n = append(n, a.Name)
		}
		return n
	}

	// A new audience: the first two users.
	write(reloadAudiencesYAML(everyone, [2]string{"first_two", "AND t.user_id <= 2"}))
	var ok struct {
		Audiences  []string  `json:"audiences"`
		ReloadedAt time.Time `json:"reloaded_at"`
	}
	if resp := s.Do("POST", "/push/audiences/reload", nil, &ok); resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: %d", resp.StatusCode)
	}
	if !slices.Equal(ok.Audiences, []string{"everyone", "first_two"}) || time.Since(ok.ReloadedAt) > time.Minute {
		t.Fatalf("reload answered %+v", ok)
	}
	if got := names(); !slices.Equal(got, []string{"everyone", "first_two"}) {
		t.Fatalf("listed after the reload: %v", got)
	}
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=false", map[string]any{"title": "hi", "body": "b", "audience": map[string]any{"name": "first_two"}}, &b); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("broadcast to the reloaded audience: %d %+v", resp.StatusCode, b)
	}
	done := s.WaitFinished(b.ID, 30*time.Second)
	if done.Status != "completed" || done.Succeeded != 2 || !accepted(s, toks[:2], 1) || !accepted(s, toks[2:], 0) {
		t.Fatalf("the broadcast to first_two: %+v", done)
	}
	if !strings.Contains(s.LogText(), "named audiences reloaded") {
		t.Error("the reload was not logged")
	}

	// A broken file: SQL that does not run and a cap that is not
	// configured. The answer names both; the set stays.
	write(reloadAudiencesYAML(everyone, [2]string{"first_two", "AND t.user_id <= 2 AND no_such_column = 1"}) +
		"  - name: capped\n    sql: \"" + strings.Replace(reloadPageSQL, "%s", "", 1) + "\"\n    frequency_cap: weekly\n")
	var failed struct {
		Error struct {
			Code     string   `json:"code"`
			Message  string   `json:"message"`
			Problems []string `json:"problems"`
		} `json:"error"`
	}
	if resp := s.Do("POST", "/push/audiences/reload", nil, &failed); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a broken file: %d %+v", resp.StatusCode, failed)
	}
	all := strings.Join(failed.Error.Problems, "\n")
	if failed.Error.Code != "reload_failed" || len(failed.Error.Problems) < 2 || !strings.Contains(all, "no_such_column") || !strings.Contains(all, "audiences.capped.frequency_cap") {
		t.Fatalf("a broken file answered %+v", failed.Error)
	}
	if got := names(); !slices.Equal(got, []string{"everyone", "first_two"}) {
		t.Fatalf("listed after a failed reload: %v", got)
	}
	var again teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast?wait=false", map[string]any{"title": "again", "body": "b", "audience": map[string]any{"name": "first_two"}}, &again); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("broadcast to the kept audience: %d", resp.StatusCode)
	}
	if done := s.WaitFinished(again.ID, 30*time.Second); done.Status != "completed" || done.Succeeded != 2 {
		t.Fatalf("the broadcast to the kept first_two: %+v", done)
	}

	// A viewer may not reload.
	if resp := s.DoAuth("POST", "/push/audiences/reload", viewerToken, nil, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a viewer's reload: %d", resp.StatusCode)
	}
}

// A broadcast binds its named audience when each plan step and chunk run
// starts. One whose audience a reload removed is handed back as in a
// rolling deploy: it goes on if the audience comes back in time, and
// fails after PUSHFAN_HANDBACK_TIMEOUT, naming why, if not.
func TestAReloadThatDropsAPlannedBroadcastsAudience(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pushfan.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	everyone, doomed := [2]string{"everyone", ""}, [2]string{"doomed", ""}
	write(reloadAudiencesYAML(everyone, doomed))
	s := reloadStack(t, file, func(c *config.Config) { c.Engine.HandBackTimeout = 3 * time.Second })
	toks := []string{"doomed-1", "doomed-2", "doomed-3"}
	s.SeedTokens(1, toks)
	reload := func(auds ...[2]string) {
		t.Helper()
		write(reloadAudiencesYAML(auds...))
		if resp := s.Do("POST", "/push/audiences/reload", nil, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("reload: %d", resp.StatusCode)
		}
	}
	schedule := func() uint64 {
		t.Helper()
		var b teststack.Broadcast
		at := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "body": "b", "send_at": at, "audience": map[string]any{"name": "doomed"}}, &b); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("schedule: %d %+v", resp.StatusCode, b)
		}
		return b.ID
	}

	// Removed, then put back before the hand-back timeout: it is sent.
	back := schedule()
	reload(everyone)
	waitUntil(t, "the plan handed back", 20*time.Second, func() bool {
		return strings.Contains(s.LogText(), "this instance cannot plan the broadcast")
	})
	reload(everyone, doomed)
	if done := s.WaitFinished(back, 30*time.Second); done.Status != "completed" || done.Succeeded != int64(len(toks)) {
		t.Fatalf("the broadcast whose audience came back: %+v", done)
	}

	// Removed for good: it fails, saying why; a new request is refused.
	gone := schedule()
	reload(everyone)
	done := s.WaitFinished(gone, 30*time.Second)
	if done.Status != "failed" || done.Error == nil || !strings.Contains(*done.Error, `named audience "doomed" is not configured`) {
		t.Fatalf("the broadcast whose audience is gone: %+v (error %v)", done, done.Error)
	}
	var refused map[string]map[string]any
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "audience": map[string]any{"name": "doomed"}}, &refused); resp.StatusCode != http.StatusBadRequest || refused["error"]["code"] != "unknown_audience" {
		t.Fatalf("a request naming the removed audience: %d %v", resp.StatusCode, refused)
	}
}
