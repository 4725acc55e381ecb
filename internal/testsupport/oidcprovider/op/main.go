// Command op is a real OpenID Connect provider for pushfan's sign-in tests:
// zitadel/oidc's example OP (its op package, its in-memory storage and its
// username and password login page), with the users and clients of a JSON
// file, a groups claim in the ID token, signing-key rotation, and faults
// to inject into the next token answer (a provider gone wrong, or an
// attacker in its place). It listens on 127.0.0.1 at a port of its own
// choosing and prints "issuer <url>" once it serves.
//
//	op -config users.json
//
// Test routes (beside the provider's own):
//
//	POST /test/rotate             sign with a new key from now on; the old one leaves the JWKS
//	POST /test/fault?kind=K       the next token answer's ID token is altered: aud (another
//	                              audience, re-signed), expired (exp an hour ago, re-signed),
//	                              nonce (no nonce, re-signed), tamper (a claim changed, the
//	                              signature kept)
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// fileConfig is the -config file: the provider's clients and users.
type fileConfig struct {
	Clients []struct {
		ID           string   `json:"id"`
		Secret       string   `json:"secret"`
		RedirectURIs []string `json:"redirect_uris"`
	} `json:"clients"`
	Users []struct {
		ID       string   `json:"id"`
		Username string   `json:"username"`
		Password string   `json:"password"`
		Email    string   `json:"email"`
		Name     string   `json:"name"`
		Groups   []string `json:"groups"`
	} `json:"users"`
}

func main() {
	path := flag.String("config", "", "JSON file of clients and users")
	flag.Parse()
	if err := run(*path); err != nil {
		fmt.Fprintln(os.Stderr, "op:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	var cfg fileConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("parse config %s: %w", path, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	issuer := fmt.Sprintf("http://%s/", ln.Addr())

	users := users{byID: map[string]*storage.User{}, groups: map[string][]string{}}
	for _, u := range cfg.Users {
		users.byID[u.ID] = &storage.User{ID: u.ID, Username: u.Username, Password: u.Password, Email: u.Email, EmailVerified: true, FirstName: u.Name}
		users.groups[u.ID] = u.Groups
	}
	for _, c := range cfg.Clients {
		storage.RegisterClients(storage.WebClient(c.ID, c.Secret, c.RedirectURIs...))
	}
	key, err := newKey()
	if err != nil {
		return err
	}
	st := &store{Storage: storage.NewStorage(users), users: users, key: key}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := exampleop.SetupServer(issuer, st, logger, false)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /test/rotate", st.rotate)
	mux.HandleFunc("POST /test/fault", st.setFault)
	mux.Handle("/oauth/token", st.faulty(router))
	mux.Handle("/", router)

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Printf("issuer %s\n", issuer)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case err := <-done:
		return err
	case <-sig:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(ctx)
	}
}

// users is the example storage's UserStore over the file's users, with
// their groups beside (the example's User has none).
type users struct {
	byID   map[string]*storage.User
	groups map[string][]string
}

func (u users) GetUserByID(id string) *storage.User { return u.byID[id] }
func (u users) GetUserByUsername(name string) *storage.User {
	for _, x := range u.byID {
		if x.Username == name {
			return x
		}
	}
	return nil
}
func (u users) ExampleClientID() string { return storage.ServiceUserID }

// key is one signing key.
type key struct {
	id  string
	rsa *rsa.PrivateKey
}

func newKey() (*key, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &key{id: fmt.Sprintf("%x", id), rsa: k}, nil
}

func (k *key) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *key) Key() any                                    { return k.rsa }
func (k *key) ID() string                                  { return k.id }

// public is a key as the JWKS lists it.
type public struct{ *key }

func (p public) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (p public) Use() string                        { return "sig" }
func (p public) Key() any                           { return &p.rsa.PublicKey }

// store is the example's in-memory storage with a signing key that
// rotates, the users' email, name and groups in the ID token, and the
// next token answer's fault.
type store struct {
	*storage.Storage
	users users

	mu    sync.Mutex
	key   *key
	fault string
}

func (s *store) current() *key {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

func (s *store) SigningKey(context.Context) (op.SigningKey, error) { return s.current(), nil }
func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}
func (s *store) KeySet(context.Context) ([]op.Key, error) { return []op.Key{public{s.current()}}, nil }

// SetUserinfoFromRequest fills the ID token's claims: the example leaves
// email and profile to the userinfo endpoint for a web client, and has no
// groups.
func (s *store) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	u := s.users.GetUserByID(req.GetSubject())
	if u == nil {
		return fmt.Errorf("user %s not found", req.GetSubject())
	}
	info.Subject = u.ID
	info.Email = u.Email
	info.EmailVerified = true
	info.Name = u.FirstName
	info.AppendClaims("groups", s.users.groups[u.ID])
	return nil
}

func (s *store) rotate(w http.ResponseWriter, _ *http.Request) {
	k, err := newKey()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	s.key = k
	s.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]string{"kid": k.id})
}

func (s *store) setFault(w http.ResponseWriter, r *http.Request) {
	kind := r.URL.Query().Get("kind")
	switch kind {
	case "aud", "expired", "nonce", "tamper":
	default:
		http.Error(w, "kind must be aud, expired, nonce or tamper", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.fault = kind
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *store) takeFault() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fault
	s.fault = ""
	return f
}
