package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"pushfan/internal/testsupport/teststack"
)

// binary is built once for the package's tests.
var binary string

// binDir holds the binaries built for the package's tests.
var binDir string

// staticBinary is the binary as `make build` builds it (static, stamped
// with the revision), built on first use: only the packaging tests need it.
var staticBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "static", "pushfan")
	cmd := exec.Command("make", "-C", "../..", "build", "BIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make build: %w\n%s", err, out)
	}
	return bin, nil
})

// mustStaticBinary is staticBinary, failing the test when it does not build.
func mustStaticBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("a packaging test of the release build (make build: minutes on a cold cache): make test runs it, make test-short does not")
	}
	bin, err := staticBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pushfan-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	if binary, err = teststack.BuildPushfan(".", dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
