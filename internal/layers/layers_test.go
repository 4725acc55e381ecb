// Package layers holds one test: the map of which pushfan package may
// import which. It keeps the README's "How it works" true: storage and the
// engine never import the API, the engine knows nothing of HTTP or FCM,
// and a new package must say where it sits before it lands.
package layers

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// allowed lists, for every package (by its path below the module), the
// pushfan packages its non-test files may import.
var allowed = map[string][]string{
	// The domain's plain types and the shared helpers: no pushfan imports.
	"model":              nil,
	"internal/clock":     nil,
	"internal/lifecycle": nil,
	"internal/logging":   nil,
	"internal/sqldb":     nil,
	"internal/apiclient": nil,
	"audience":           {"config"}, // named audiences: SQL over an injected pool, compiled from the config's definitions
	"fcmemu":             nil,        // the emulator knows nothing of pushfan
	// The engine: targets in, classified outcomes out. No HTTP, no FCM.
	"fanout": {"internal/clock", "internal/lifecycle"},
	// The FCM client implements the engine's Sender.
	"fcm": {"fanout"},
	// Schedules and their scheduler, behind a Submitter.
	"cron": {"config", "internal/lifecycle"},
	// The chunk protocol and the storage.
	"lease":      {"internal/sqldb", "model", "repository"},                         // the one owner of broadcasts' and chunks' statuses and counters
	"repository": {"model", "internal/sqldb", "internal/clock", "internal/logging"}, // reads and inserts by entity; no transitions
	"retention":  {"internal/clock", "internal/lifecycle"},
	"metrics":    nil,                                      // Prometheus collectors; fanout.Metrics takes plain values
	"quota":      {"internal/lifecycle", "internal/sqldb"}, // the cluster's rate budget, over MySQL, behind quota.Limiter
	// The domain: request rules, submit, dispatch, chunk runs, finish.
	// fcm: only its error-code vocabulary (which codes a resend may cover).
	"broadcast": {"audience", "cron", "fanout", "fcm", "lease", "model", "repository", "internal/clock", "internal/lifecycle", "internal/logging"},
	"config":    {"model"}, // plain settings; the domain compiles audiences and jobs
	// The HTTP API: decode, call the domain, render.
	"server":         {"audience", "broadcast", "config", "console", "cron", "fcm", "model", "internal/logging", "server/openapi"},
	"server/openapi": nil, // the API's OpenAPI document, embedded; the test stack validates against it
	"console":        nil, // the admin console's files, embedded; it talks to the server over HTTP only
	// Wiring and the binaries.
	"internal/app":      {"audience", "broadcast", "config", "cron", "fanout", "fcm", "lease", "metrics", "model", "quota", "repository", "retention", "server"},
	"cmd/pushfan":       {"config", "fcmemu", "internal/app", "internal/demo", "internal/logging", "internal/sqldb", "model", "repository"},
	"cmd/pushfan-bench": {"config", "internal/apiclient"}, // config: the defaults a latency sweep runs at
	"cmd/pushfan-load":  {"internal/apiclient"},
	// Demo data and test support.
	"internal/demo":      {"internal/sqldb"},
	"internal/testdb":    {"internal/sqldb", "repository"},
	"internal/teststack": {"broadcast", "config", "fcmemu", "internal/apiclient", "internal/app", "internal/demo", "internal/logging", "internal/sqldb", "internal/testdb", "lease", "repository", "server/openapi"},
	"internal/layers":    nil,
}

func TestImportsFollowTheLayers(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		seen[rel] = true
		want, ok := allowed[rel]
		if !ok {
			t.Errorf("package %s is not on the map: add it to allowed in internal/layers (and to the README's tree)", rel)
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			dep, ok := strings.CutPrefix(p, "pushfan/")
			if !ok {
				continue
			}
			if !slices.Contains(want, dep) {
				t.Errorf("%s imports pushfan/%s, which its layer does not allow (allowed: %v)", filepath.ToSlash(mustRel(root, path)), dep, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var gone []string
	for pkg := range allowed {
		if !seen[pkg] && pkg != "internal/layers" {
			gone = append(gone, pkg)
		}
	}
	sort.Strings(gone)
	if len(gone) > 0 {
		t.Errorf("packages on the map that no longer exist: %v", gone)
	}
}

func mustRel(root, path string) string {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return rel
}
