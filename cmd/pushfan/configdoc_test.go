package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestConfigDocIsCurrent runs `pushfan config doc` and compares its output
// with the committed docs/configuration.md: the reference is generated from
// the config's own table, and a page that differs was edited by hand or not
// regenerated after a setting changed.
func TestConfigDocIsCurrent(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"config", "doc"}, &stdout, &stderr); err != nil {
		t.Fatalf("pushfan config doc: %v\n%s", err, stderr.String())
	}
	const page = "../../docs/configuration.md"
	committed, err := os.ReadFile(page)
	if err != nil {
		t.Fatalf("reading %s: %v (generate it with `make docs`)", page, err)
	}
	if bytes.Equal(committed, stdout.Bytes()) {
		return
	}
	got, want := strings.Split(string(committed), "\n"), strings.Split(stdout.String(), "\n")
	line := 0
	for line < len(got) && line < len(want) && got[line] == want[line] {
		line++
	}
	var have, gen string
	if line < len(got) {
		have = got[line]
	}
	if line < len(want) {
		gen = want[line]
	}
	t.Fatalf("docs/configuration.md differs from `pushfan config doc` at line %d:\n  committed: %.200q\n  generated: %.200q\n"+
		"regenerate it: make docs (or go run ./cmd/pushfan config doc > docs/configuration.md), and commit it", line+1, have, gen)
}

// TestConfigDocIgnoresTheEnvironment: the page is the same on every
// machine, whatever is set where it is generated.
func TestConfigDocIgnoresTheEnvironment(t *testing.T) {
	var plain, set, stderr bytes.Buffer
	setEnv(t, nil)
	if err := run(context.Background(), []string{"config", "doc"}, &plain, &stderr); err != nil {
		t.Fatal(err)
	}
	setEnv(t, goodEnv())
	if err := run(context.Background(), []string{"config", "doc"}, &set, &stderr); err != nil {
		t.Fatal(err)
	}
	if plain.String() != set.String() {
		t.Fatal("pushfan config doc printed another page with PUSHFAN_* variables set")
	}
	for _, secret := range []string{checkToken1, checkInternal, checkPassword} {
		if strings.Contains(set.String(), secret) {
			t.Errorf("the reference contains %q from the environment", secret)
		}
	}
}
