package genclient

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGeneratedClientIsCurrent runs doc.go's go:generate line (the pinned
// oapi-codegen) on today's document and fails while client.gen.go differs
// from what it writes. A document the generator refuses (a duplicate type
// name, say) fails here with the generator's own message.
func TestGeneratedClientIsCurrent(t *testing.T) {
	args := generateCommand(t)
	// On a fresh machine `go run pkg@version` fetches and builds the
	// generator first (about 40 s here); then it comes from the build cache.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	committed, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatalf("reading client.gen.go: %v (generate it: go generate ./internal/testsupport/genclient/)", err)
	}
	if bytes.Equal(committed, stdout.Bytes()) {
		return
	}
	line, have, gen := firstDifference(string(committed), stdout.String())
	t.Fatalf("client.gen.go differs from what oapi-codegen makes of server/openapi/openapi.json at line %d:\n  committed: %.200q\n  generated: %.200q\n"+
		"regenerate it: go generate ./internal/testsupport/genclient/, and commit it", line, have, gen)
}

// generateCommand returns doc.go's go:generate command without its
// "-o client.gen.go", so that the generator writes to stdout.
func generateCommand(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(src), "\n") {
		rest, ok := strings.CutPrefix(line, "//go:generate ")
		if !ok {
			continue
		}
		args := strings.Fields(rest)
		i := slices.Index(args, "-o")
		if i < 0 || i+1 >= len(args) || args[i+1] != "client.gen.go" {
			t.Fatalf("doc.go's go:generate line %q does not write client.gen.go with -o", line)
		}
		return slices.Delete(args, i, i+2)
	}
	t.Fatal("doc.go has no go:generate line")
	return nil
}

// firstDifference returns the first line (1-based) where a and b differ,
// and that line of each ("" past its end).
func firstDifference(a, b string) (int, string, string) {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	i := 0
	for i < len(al) && i < len(bl) && al[i] == bl[i] {
		i++
	}
	var x, y string
	if i < len(al) {
		x = al[i]
	}
	if i < len(bl) {
		y = bl[i]
	}
	return i + 1, x, y
}
