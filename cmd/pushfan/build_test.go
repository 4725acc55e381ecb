package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The release binary links nothing at run time: it starts in a FROM
// scratch image and on any Linux, whatever its libc.
func TestStaticBinaryLinksNothing(t *testing.T) {
	bin := mustStaticBinary(t)
	out, err := exec.Command("ldd", bin).CombinedOutput()
	// ldd exits 1 for a static binary, saying so.
	if !strings.Contains(string(out), "not a dynamic executable") {
		t.Fatalf("ldd %s (err %v) does not say it is static:\n%s", bin, err, out)
	}
}

// The CA roots and the zone database are compiled in: the binary reaches
// FCM over TLS and reads users' zones on a host with neither. go version -m
// lists the modules a binary holds (the roots are one) but not standard
// packages, so the symbol table shows both packages' init functions.
func TestBinaryEmbedsRootsAndZones(t *testing.T) {
	bin := mustStaticBinary(t)
	out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, out)
	}
	for _, want := range []string{"dep\tgolang.org/x/crypto/x509roots/fallback", "CGO_ENABLED=0"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("go version -m %s lists no %q:\n%s", bin, want, out)
		}
	}
	syms, err := exec.Command("go", "tool", "nm", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm: %v\n%s", err, syms)
	}
	for _, want := range []string{" T time/tzdata.init.0\n", " T golang.org/x/crypto/x509roots/fallback.init.0\n"} {
		if !strings.Contains(string(syms), want) {
			t.Errorf("the binary has no%s", strings.TrimSuffix(want, "\n"))
		}
	}
}

func TestVersionNamesTheRevision(t *testing.T) {
	bin := mustStaticBinary(t)
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout (git rev-parse HEAD: %v): no revision to compare", err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("pushfan version: %v\n%s", err, out)
	}
	rev := strings.TrimSpace(string(head))
	if !strings.Contains(string(out), "revision "+rev) {
		t.Errorf("pushfan version does not name revision %s:\n%s", rev, out)
	}
	if strings.Contains(string(out), "time     unknown") {
		t.Errorf("pushfan version has no commit time:\n%s", out)
	}
}

// The zones resolve from the binary itself: in a root holding nothing but
// the binary and an empty directory that ZONEINFO names, as in the image,
// the configured default zone and a job's zone load (config check loads
// both), and a zone that does not exist is still refused.
func TestZonesResolveWithoutZoneinfo(t *testing.T) {
	// The binary runs chrooted, where no /usr/share/zoneinfo exists to
	// fall back on (Go reads ZONEINFO, then the system's, then tzdata):
	// outside a chroot the host's zones would hide a missing tzdata.
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the zones test chroots, which needs root; CI runs as root")
		}
		t.Skip("needs root to chroot the binary away from the host's /usr/share/zoneinfo")
	}
	bin := mustStaticBinary(t)
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "zoneinfo"), 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pushfan"), raw, 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := "jobs:\n  - name: morning\n    schedule: \"0 9 * * *\"\n    timezone: Asia/Kolkata\n    audience: {all: true}\n    message: {title: t, body: b}\n"
	if err := os.WriteFile(filepath.Join(root, "pushfan.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(zone string) (string, error) {
		cmd := exec.Command("/pushfan", "config", "check") // the path inside the chroot
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		cmd.Env = []string{
			"ZONEINFO=/zoneinfo",
			"PUSHFAN_CONFIG=/pushfan.yaml",
			"PUSHFAN_DEFAULT_TIMEZONE=" + zone,
			"PUSHFAN_FCM_ENDPOINT=http://127.0.0.1:9/v1",
			"PUSHFAN_FCM_PROJECT_ID=zones",
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := check("America/New_York"); err != nil {
		t.Fatalf("config check with PUSHFAN_DEFAULT_TIMEZONE=America/New_York in an empty root: %v\n%s", err, out)
	} else if !strings.Contains(out, "PUSHFAN_DEFAULT_TIMEZONE=America/New_York") {
		t.Errorf("config check does not show the zone:\n%s", out)
	}
	if out, err := check("Mars/Olympus_Mons"); err == nil || !strings.Contains(out, "not a known IANA zone") {
		t.Errorf("an unknown zone passed config check (err %v):\n%s", err, out)
	}
}

// make dist: an archive per platform and SHA256SUMS that sha256sum -c
// accepts. The test builds linux/amd64 only (the build the other tests
// already made); make dist itself adds linux/arm64, a cross-compile of
// every package that would double this test's time.
func TestMakeDist(t *testing.T) {
	mustStaticBinary(t) // the same build, already cached
	dist := t.TempDir()
	out, err := exec.Command("make", "-C", "../..", "dist", "DIST="+dist, "VERSION=test", "DIST_PLATFORMS=linux/amd64").CombinedOutput()
	if err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}
	check := exec.Command("sha256sum", "-c", "SHA256SUMS")
	check.Dir = dist
	if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), "pushfan-test-linux-amd64.tar.gz: OK") {
		t.Fatalf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	}
	list, err := exec.Command("tar", "-tzf", filepath.Join(dist, "pushfan-test-linux-amd64.tar.gz")).CombinedOutput()
	if err != nil {
		t.Fatalf("tar -t: %v\n%s", err, list)
	}
	for _, want := range []string{"pushfan-test-linux-amd64/pushfan", "pushfan-test-linux-amd64/deploy/pushfan.service",
		"pushfan-test-linux-amd64/deploy/compose.yaml", "pushfan-test-linux-amd64/deploy/pushfan.example.yaml",
		"pushfan-test-linux-amd64/docs/deployment.md", "pushfan-test-linux-amd64/README.md"} {
		if !strings.Contains(string(list), want+"\n") {
			t.Errorf("the archive has no %s:\n%s", want, list)
		}
	}
	x := exec.Command("tar", "-xzf", "pushfan-test-linux-amd64.tar.gz")
	x.Dir = dist
	if out, err := x.CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v\n%s", err, out)
	}
	if out, _ := exec.Command("ldd", filepath.Join(dist, "pushfan-test-linux-amd64", "pushfan")).CombinedOutput(); !strings.Contains(string(out), "not a dynamic executable") {
		t.Errorf("the archive's binary is not static:\n%s", out)
	}
}
