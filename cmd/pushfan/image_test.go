package main

// The image is built here and run here: buildah (no daemon) builds it
// from the Containerfile with `make image`, and the test serves a
// broadcast from the image against the test MariaDB and the FCM emulator,
// both pushfan processes running inside the image (FROM scratch: no CA
// bundle, no zoneinfo, no shell), and runs the image's health check in it.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"pushfan/internal/devtools/apiclient"
	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

const imageToken = "image-test-admin-token-0123456789"

// buildah runs buildah on the test's own storage (vfs, in a temporary
// directory): nothing is shared with other builds on the machine.
type buildah struct {
	t    *testing.T
	args []string // the storage flags
}

func newBuildah(t *testing.T) *buildah {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the image with buildah: make test runs it, make test-short does not")
	}
	if _, err := exec.LookPath("buildah"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("buildah is missing in CI: .ci/run installs it with scripts/ensure-buildah.sh")
		}
		t.Skip("buildah is not installed (bash scripts/ensure-buildah.sh installs it)")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the image test runs buildah with vfs storage and chroot isolation, which needs root; CI runs as root")
		}
		t.Skip("buildah's vfs storage and chroot isolation need root here")
	}
	dir := t.TempDir()
	return &buildah{t: t, args: []string{"--storage-driver", "vfs", "--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run")}}
}

// cmd is a buildah command with the test's storage.
func (b *buildah) cmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "buildah", append(slices.Clone(b.args), args...)...)
}

// run runs a buildah command to its end, failing the test when it fails.
func (b *buildah) run(what string, args ...string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.t.Context(), 2*time.Minute)
	defer cancel()
	out, err := b.cmd(ctx, args...).CombinedOutput()
	if ctx.Err() != nil {
		b.t.Fatalf("%s: buildah %s did not finish within 2 minutes\n%s", what, strings.Join(args, " "), out)
	}
	if err != nil {
		b.t.Fatalf("%s: buildah %s: %v\n%s", what, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// container is a pushfan process running in the image.
type container struct {
	name string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan struct{}
}

// start runs `pushfan args...` in the container ctr (buildah run, chroot
// isolation, the host's network), with env and the config directory cfg
// mounted read-only at /etc/pushfan. It is stopped when the test ends.
func (b *buildah) start(ctr, name, cfg string, env []string, args ...string) *container {
	b.t.Helper()
	runArgs := []string{"run", "--isolation", "chroot", "--network", "host", "-v", cfg + ":/etc/pushfan:ro"}
	for _, e := range env {
		runArgs = append(runArgs, "--env", e)
	}
	runArgs = append(append(runArgs, ctr, "--", "/pushfan"), args...)
	c := &container{name: name, cmd: b.cmd(context.Background(), runArgs...), log: &bytes.Buffer{}, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	// Its own process group: the stop below reaches buildah's helpers and
	// pushfan under them, and nothing else.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		b.t.Fatalf("starting %s in the image: %v", name, err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	b.t.Cleanup(func() {
		// buildah stops what it runs on SIGTERM; the group's SIGKILL is
		// for a buildah that does not.
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			b.t.Errorf("%s (buildah pid %d) did not stop within 30s of SIGTERM", name, c.cmd.Process.Pid)
			<-c.done
		}
		if b.t.Failed() {
			b.t.Logf("log of %s in the image:\n%s", name, teststack.Tail(c.log.String(), 40))
		}
	})
	return c
}

// waitHTTP waits until GET url answers 200, or fails the test when c
// exits first or within passes.
func (c *container) waitHTTP(t *testing.T, url string, within time.Duration) {
	t.Helper()
	teststack.WaitEvery(t, c.name+" in the image to answer GET "+url, within, 100*time.Millisecond, func() bool {
		select {
		case <-c.done:
			t.Fatalf("%s in the image exited before answering GET %s:\n%s", c.name, url, teststack.Tail(c.log.String(), 40))
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestImageServesABroadcast(t *testing.T) {
	b := newBuildah(t)
	tmp := t.TempDir()

	// make image, as a user runs it, on the test's storage and paths.
	archive := filepath.Join(tmp, "pushfan-image.tar")
	dockerArchive := filepath.Join(tmp, "pushfan-image.docker.tar")
	make := exec.Command("make", "-C", "../..", "image",
		"BUILDAH=buildah "+strings.Join(b.args, " "),
		"BIN="+filepath.Join(tmp, "context", "bin", "pushfan"),
		"IMAGE_CONTEXT="+filepath.Join(tmp, "context"),
		"IMAGE=localhost/pushfan:image-test",
		"IMAGE_ARCHIVE="+archive,
		"IMAGE_DOCKER_ARCHIVE="+dockerArchive,
	)
	if out, err := make.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	checkOCIArchive(t, archive, "localhost/pushfan:image-test")
	checkDockerArchiveHealthcheck(t, dockerArchive)

	// The container comes from the exported archive, as docker load or
	// podman load would take it.
	ctr := strings.TrimSpace(b.run("buildah from the OCI archive", "from", "--quiet", "--name", "pushfan-image-test", "oci-archive:"+archive))
	t.Cleanup(func() { _ = b.cmd(context.Background(), "rm", ctr).Run() })
	// The image's own user, not root.
	if user := strings.TrimSpace(b.run("buildah inspect", "inspect", "--format", "{{.OCIv1.Config.User}}", ctr)); user != "65532:65532" {
		t.Errorf("the image runs as %q, want 65532:65532", user)
	}

	// A config in the mounted /etc/pushfan: a default zone to load with
	// no zoneinfo in the image (serve refuses a zone it cannot load).
	cfgDir := filepath.Join(tmp, "etc-pushfan")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "pushfan.yaml"), []byte("engine:\n  default_timezone: America/New_York\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	emuAddr := freeAddr(t)
	emu := b.start(ctr, "pushfan emulator", cfgDir, nil, "emulator", "-addr", emuAddr, "-latency", "5ms")
	emu.waitHTTP(t, "http://"+emuAddr+"/emulator/stats", time.Minute)

	tdb := testdb.New(t)
	const users, dead = 40, 3
	for i := 1; i <= users; i++ {
		token := fmt.Sprintf("image-token-%03d", i)
		if i <= dead {
			token = fmt.Sprintf("unregistered-image-%03d", i)
		}
		if _, err := tdb.SQL.Exec("INSERT INTO users (id) VALUES (?)", i); err != nil {
			t.Fatal(err)
		}
		if _, err := tdb.SQL.Exec("INSERT INTO device_tokens (user_id, token) VALUES (?, ?)", i, token); err != nil {
			t.Fatal(err)
		}
	}

	addr := freeAddr(t)
	srv := b.start(ctr, "pushfan serve", cfgDir, []string{
		"PUSHFAN_CONFIG=/etc/pushfan/pushfan.yaml",
		"PUSHFAN_HTTP_ADDR=" + addr,
		"PUSHFAN_MYSQL_DSN=" + tdb.DSN,
		"PUSHFAN_FCM_ENDPOINT=http://" + emuAddr + "/v1",
		"PUSHFAN_FCM_PROJECT_ID=image-test",
		"PUSHFAN_ADMIN_TOKENS=" + imageToken,
	}, "serve")
	srv.waitHTTP(t, "http://"+addr+"/readyz", time.Minute)

	got := postBroadcast(t, "http://"+addr)
	if got.Status != "completed" || got.Targeted != users || got.Succeeded != users-dead || got.Failed != dead ||
		got.Errors["UNREGISTERED"] != dead || got.InvalidatedTokens != dead {
		t.Errorf("broadcast from the image: status %s, targeted %d, succeeded %d, failed %d, errors %v, invalidated %d; want completed, %d, %d, %d, UNREGISTERED:%d, %d",
			got.Status, got.Targeted, got.Succeeded, got.Failed, got.Errors, got.InvalidatedTokens, users, users-dead, dead, dead, dead)
	}
	var stats struct {
		Requests int64            `json:"requests"`
		Accepted int64            `json:"accepted"`
		ByCode   map[string]int64 `json:"by_code"`
	}
	getJSON(t, "http://"+emuAddr+"/emulator/stats", &stats)
	if stats.Accepted != users-dead || stats.Requests != users || stats.ByCode["UNREGISTERED"] != dead {
		t.Errorf("the emulator saw %d requests, accepted %d, by code %v; want %d, %d, UNREGISTERED:%d",
			stats.Requests, stats.Accepted, stats.ByCode, users, users-dead, dead)
	}

	// The health check, inside the image: ready, then nothing listening.
	if out := b.run("pushfan healthcheck in the image", "run", "--isolation", "chroot", "--network", "host",
		"--env", "PUSHFAN_HTTP_ADDR="+addr, ctr, "--", "/pushfan", "healthcheck"); strings.TrimSpace(out) != "" {
		t.Errorf("a passing healthcheck said %q", out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := b.cmd(ctx, "run", "--isolation", "chroot", "--network", "host",
		"--env", "PUSHFAN_HTTP_ADDR="+freeAddr(t), ctr, "--", "/pushfan", "healthcheck").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "connection refused") {
		t.Errorf("healthcheck in the image with nothing listening: err %v, said %q; want a failure naming connection refused", err, out)
	}
}

func postBroadcast(t *testing.T, base string) apiclient.Broadcast {
	t.Helper()
	body := `{"title":"from the image","body":"hello","audience":{"all":true}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/push/broadcast", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+imageToken)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST /push/broadcast: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var b apiclient.Broadcast
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("POST /push/broadcast: %s: %s", resp.Status, raw)
	}
	if resp.StatusCode == http.StatusAccepted {
		// Not done within the server's wait: poll it to its end.
		teststack.WaitEvery(t, fmt.Sprintf("broadcast %d to finish", b.ID), time.Minute, 200*time.Millisecond, func() bool {
			getJSONAuth(t, fmt.Sprintf("%s/push/broadcasts/%d", base, b.ID), &b)
			return b.Final()
		})
	} else if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /push/broadcast: %s: %s", resp.Status, raw)
	}
	return b
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %s: %v", url, resp.Status, err)
	}
}

func getJSONAuth(t *testing.T, url string, v any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+imageToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %s: %v", url, resp.Status, err)
	}
}

// checkOCIArchive checks that archive is an OCI image layout (what
// `docker load` and `podman load` take as an OCI archive) naming ref.
func checkOCIArchive(t *testing.T, archive, ref string) {
	t.Helper()
	files := tarFiles(t, archive, "oci-layout", "index.json")
	var index struct {
		Manifests []struct {
			MediaType   string            `json:"mediaType"`
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatalf("%s: index.json: %v", archive, err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].MediaType != "application/vnd.oci.image.manifest.v1+json" ||
		index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != ref {
		t.Fatalf("%s: index.json is not one OCI manifest named %s:\n%s", archive, ref, files["index.json"])
	}
	manifestPath := blobPath(index.Manifests[0].Digest)
	var manifest struct {
		Layers []struct {
			Digest string `json:"digest"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(tarFiles(t, archive, manifestPath)[manifestPath], &manifest); err != nil {
		t.Fatalf("%s: the manifest: %v", archive, err)
	}
	// FROM scratch: the binary and the config directory, nothing else.
	var entries []string
	for _, l := range manifest.Layers {
		p := blobPath(l.Digest)
		gz, err := gzip.NewReader(bytes.NewReader(tarFiles(t, archive, p)[p]))
		if err != nil {
			t.Fatalf("%s: layer %s: %v", archive, l.Digest, err)
		}
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: layer %s: %v", archive, l.Digest, err)
			}
			entries = append(entries, fmt.Sprintf("%s %o", strings.TrimSuffix(h.Name, "/"), h.Mode&0o7777))
		}
	}
	slices.Sort(entries)
	if want := []string{"etc 755", "etc/pushfan 755", "pushfan 755"}; !slices.Equal(entries, want) {
		t.Errorf("%s: the image holds %v, want %v", archive, entries, want)
	}
}

// blobPath is where an OCI layout keeps the blob of digest.
func blobPath(digest string) string {
	return "blobs/" + strings.Replace(digest, ":", "/", 1)
}

// checkDockerArchiveHealthcheck checks that the docker archive's image
// config carries the Containerfile's HEALTHCHECK.
func checkDockerArchiveHealthcheck(t *testing.T, archive string) {
	t.Helper()
	files := tarFiles(t, archive, "manifest.json")
	var manifest []struct {
		Config   string   `json:"Config"`
		RepoTags []string `json:"RepoTags"`
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("%s: manifest.json (%v):\n%s", archive, err, files["manifest.json"])
	}
	cfg := tarFiles(t, archive, manifest[0].Config)[manifest[0].Config]
	var image struct {
		Config struct {
			Healthcheck struct {
				Test []string `json:"Test"`
			} `json:"Healthcheck"`
		} `json:"config"`
	}
	if err := json.Unmarshal(cfg, &image); err != nil {
		t.Fatalf("%s: %s: %v", archive, manifest[0].Config, err)
	}
	if want := []string{"CMD", "/pushfan", "healthcheck"}; !slices.Equal(image.Config.Healthcheck.Test, want) {
		t.Errorf("%s: the image's healthcheck is %v, want %v", archive, image.Config.Healthcheck.Test, want)
	}
}

// tarFiles reads the named files of a tar archive; each must be there.
func tarFiles(t *testing.T, archive string, names ...string) map[string][]byte {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading %s: %v", archive, err)
		}
		if slices.Contains(names, strings.TrimPrefix(h.Name, "./")) {
			raw, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimPrefix(h.Name, "./")] = raw
		}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			t.Fatalf("%s has no %s", archive, n)
		}
	}
	return out
}
