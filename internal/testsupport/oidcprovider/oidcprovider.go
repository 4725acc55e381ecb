// Package oidcprovider runs a real OpenID Connect provider (its main, op,
// is zitadel/oidc's example OP with users in groups, key rotation and
// injectable faults) as a separate process on loopback, for the tests of
// the console's sign-in, and walks its login page as a browser would.
package oidcprovider

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Client is a relying party registered at the provider, with the exact
// redirect URIs it may send browsers to (http ones are allowed: the
// provider's clients are in development mode).
type Client struct {
	ID           string   `json:"id"`
	Secret       string   `json:"secret"`
	RedirectURIs []string `json:"redirect_uris"`
}

// User is a person the provider signs in, with their groups (the ID
// token's groups claim).
type User struct {
	ID       string   `json:"id"`
	Username string   `json:"username"`
	Password string   `json:"password"`
	Email    string   `json:"email"`
	Name     string   `json:"name"`
	Groups   []string `json:"groups"`
}

// Provider is a running provider process.
type Provider struct {
	// Issuer is its issuer URL (http://127.0.0.1:port/).
	Issuer string
}

// Start builds the provider (from the module cache, with the go command),
// runs it with clients and users, and waits for its discovery document;
// the test's cleanup stops it. Every wait has a deadline.
func Start(t testing.TB, clients []Client, users []User) *Provider {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "op")
	bctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(bctx, "go", "build", "-o", bin, "pushfan/internal/testsupport/oidcprovider/op")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the OIDC provider: %v\n%s", err, out)
	}
	cfg, err := json.Marshal(map[string]any{"clients": clients, "users": users})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "op.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", cfgPath)
	cmd.Stderr = &testWriter{t: t}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the OIDC provider: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	issuer := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "issuer "); ok {
				issuer <- u
			}
		}
	}()
	p := &Provider{}
	select {
	case p.Issuer = <-issuer:
	case err := <-exited:
		t.Fatalf("the OIDC provider exited before it served: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("timed out after 30s waiting for the OIDC provider to print its issuer")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.Issuer + ".well-known/openid-configuration")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for the OIDC provider's discovery document: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Rotate makes the provider sign with a new key from now on (the old one
// leaves its JWKS) and returns the new key's id.
func (p *Provider) Rotate(t testing.TB) string {
	t.Helper()
	var out struct {
		Kid string `json:"kid"`
	}
	p.post(t, "test/rotate", &out)
	return out.Kid
}

// Fault alters the ID token of the provider's next token answer: "aud"
// (another audience), "expired", "nonce" (none) are re-signed with its
// key; "tamper" changes a claim under the original signature.
func (p *Provider) Fault(t testing.TB, kind string) {
	t.Helper()
	p.post(t, "test/fault?kind="+url.QueryEscape(kind), nil)
}

func (p *Provider) post(t testing.TB, path string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
	}
}

// Authorize walks a sign-in as a browser would, up to the relying party's
// callback: it GETs loginURL (the relying party's start, which redirects
// to the provider), fills the provider's login page with username and
// password, and follows the provider's redirects until one leads to a
// URL whose path is callbackPath, which it returns without requesting
// it. c must have a cookie jar (the relying party's state cookie and the
// provider's own go in it).
func Authorize(ctx context.Context, c *http.Client, loginURL, callbackPath, username, password string) (*url.URL, error) {
	var callback *url.URL
	stop := *c
	stop.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == callbackPath {
			callback = req.URL
			return http.ErrUseLastResponse
		}
		if len(via) > 20 {
			return errors.New("more than 20 redirects")
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loginURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := stop.Do(req)
	if err != nil {
		return nil, fmt.Errorf("start at %s: %w", loginURL, err)
	}
	page := resp.Request.URL
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if callback != nil {
		return callback, nil // already signed in at the provider
	}
	id := page.Query().Get("authRequestID")
	if resp.StatusCode != http.StatusOK || id == "" {
		return nil, fmt.Errorf("expected the provider's login page, got %d at %s", resp.StatusCode, page)
	}
	form := url.Values{"id": {id}, "username": {username}, "password": {password}}
	post, err := http.NewRequestWithContext(ctx, http.MethodPost, page.Scheme+"://"+page.Host+"/login/username", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = stop.Do(post)
	if err != nil {
		return nil, fmt.Errorf("log in at the provider: %w", err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if callback == nil {
		return nil, fmt.Errorf("the provider did not send the browser back (%d at %s): %.300s", resp.StatusCode, resp.Request.URL, b)
	}
	return callback, nil
}

// testWriter sends the provider's log to the test's.
type testWriter struct{ t testing.TB }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
