package genclient

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pushfan/server/openapi"
)

// TestTypeScriptTypes does what an admin panel team in TypeScript does with
// GET /openapi.json: openapi-typescript makes types of it, and tsc --strict
// compiles them with testdata/ts/usage.ts, which builds a submit and reads
// the broadcast object and the error object. Both tools are pinned in
// testdata/ts/package-lock.json and installed by npm ci in a temporary
// directory (npm's cache makes it a few seconds after the first time).
// Node.js and npm must be installed: scripts/ensure-node.sh (make test runs
// it) installs them.
func TestTypeScriptTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Node.js and npm ci: make test runs it, make test-short does not")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed; the TypeScript check needs Node.js and npm (bash scripts/ensure-node.sh installs them): %v", tool, err)
		}
	}
	dir := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", ".npmrc", "usage.ts"} {
		src, err := os.ReadFile(filepath.Join("testdata", "ts", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The document as GET /openapi.json serves it (server/openapi embeds
	// it, and the server serves exactly those bytes).
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), openapi.Document(), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		t.Logf("%s %s: %v", filepath.Base(name), args[0], time.Since(start).Round(time.Millisecond))
	}
	bin := func(tool string) string { return filepath.Join(dir, "node_modules", ".bin", tool) }
	run("npm", "ci", "--no-audit", "--no-fund", "--prefer-offline")
	run(bin("openapi-typescript"), "openapi.json", "--output", "openapi.d.ts")
	// No --skipLibCheck: it would skip openapi.d.ts, the file under test.
	// --lib es2022 leaves out the DOM's declarations, which nothing here uses.
	run(bin("tsc"), "--strict", "--noEmit", "--target", "es2022", "--lib", "es2022", "--module", "esnext", "--moduleResolution", "bundler",
		"openapi.d.ts", "usage.ts")
}
