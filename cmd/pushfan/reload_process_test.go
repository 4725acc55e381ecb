//go:build !race

// A process drill too (process_test.go): left out of race builds with them.

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"pushfan/fcmemu"
)

const hupSQL = "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after AND t.id <= :upto ORDER BY t.id LIMIT :limit"

// hupYAML is a config file of the named audiences names, each over every
// token.
func hupYAML(names ...string) string {
	var b strings.Builder
	b.WriteString("audiences:\n")
	for _, n := range names {
		b.WriteString("  - name: " + n + "\n    sql: \"" + hupSQL + "\"\n")
	}
	return b.String()
}

// SIGHUP to a real `pushfan serve` reloads its named audiences from
// PUSHFAN_CONFIG's file and does not stop it; a broken file is logged
// with its problems and the audiences stay.
func TestSIGHUPReloadsTheNamedAudiences(t *testing.T) {
	e := newProcEnv(t, 10, fcmemu.Config{})
	file := filepath.Join(t.TempDir(), "pushfan.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(hupYAML("everyone"))
	p := e.startAsWith("hup", "hup", "PUSHFAN_CONFIG="+file)
	listed := func() []string {
		t.Helper()
		req, _ := http.NewRequest("GET", p.URL+"/push/audiences", nil)
		req.Header.Set("Authorization", "Bearer "+procToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET /push/audiences: %v", err)
		}
		defer resp.Body.Close()
		var out struct {
			Named []struct {
				Name string `json:"name"`
			} `json:"named"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, a := range out.Named {
			names = append(names, a.Name)
		}
		return names
	}
	hangUp := func() {
		t.Helper()
		if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			select {
			case <-p.Done:
				t.Fatalf("pushfan exited (%v) waiting for %s", p.ExitErr, what)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out after 20s waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if got := listed(); !slices.Equal(got, []string{"everyone"}) {
		t.Fatalf("at start: %v", got)
	}

	write(hupYAML("everyone", "again"))
	hangUp()
	waitFor("the new audience listed after SIGHUP", func() bool { return slices.Equal(listed(), []string{"everyone", "again"}) })

	write(hupYAML("everyone", "again") + "  - name: broken\n    sql: \"SELECT 1\"\n")
	hangUp()
	logText := func() string { raw, _ := os.ReadFile(p.Log); return string(raw) }
	waitFor("the failed reload logged", func() bool { return strings.Contains(logText(), "reloading the named audiences failed") })
	if !strings.Contains(logText(), "broken") {
		t.Errorf("the failed reload's log does not name the broken audience:\n%s", logText())
	}
	if got := listed(); !slices.Equal(got, []string{"everyone", "again"}) {
		t.Fatalf("after a failed reload: %v", got)
	}
	select {
	case <-p.Done:
		t.Fatalf("SIGHUP stopped pushfan: %v", p.ExitErr)
	default:
	}
}
