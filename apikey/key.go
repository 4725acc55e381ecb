package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"pushfan/model"
)

// Key is one API key as the API lists it: never its secret.
type Key struct {
	ID   string     `json:"id"`
	Name string     `json:"name"`
	Role model.Role `json:"role"`
	// Apps are the apps it may use; nil: every app.
	Apps       []string   `json:"apps"`
	CreatedAt  time.Time  `json:"created_at"`
	CreatedBy  string     `json:"created_by,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// Actor is the key as the actor of what it does: kind key, its id and
// its name.
func (k Key) Actor() model.Actor { return model.Actor{Kind: model.ActorKey, ID: k.ID, Name: k.Name} }

// Created is a key just created, with its secret: the only time the
// secret exists outside the caller's hands.
type Created struct {
	Key
	Secret string `json:"key"`
}

// Spec is what a create asks for, as the request carries it: every field
// is checked (Check) before anything is stored.
type Spec struct {
	Name string
	Role string
	// Apps nil: every app; an empty list is refused (a key of no app
	// could do nothing).
	Apps []string
	// ExpiresIn is a duration ("720h", "90m" or "30d"); "": never.
	ExpiresIn string
	// By is who creates it.
	By model.Actor
}

// NamePattern is what a key may be called: as an environment token's name
// (config), 1 to 64 letters, digits, '.', '_' or '-'.
var NamePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Prefix starts every key's secret: secret scanners (and a reader of a
// leaked log) recognise it, and the server tells a key from an
// environment token without a lookup.
const Prefix = "pfk_"

// secretBytes is a secret's randomness: 256 bits.
const secretBytes = 32

// FieldError is a refusal of one request field: Field names it as the
// API's JSON does (name, role, apps[1], expires_in), Code is a stable
// snake_case code.
type FieldError struct {
	Field, Code, Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func refuse(field, code, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Errors of the store and of checking a key.
var (
	// ErrNotFound: no key has the id (a revoke's 404).
	ErrNotFound = errors.New("no API key with this id")
	// ErrUnknown: the presented secret is no key's.
	ErrUnknown = errors.New("the API key is not valid")
	// ErrRevoked: the key was revoked.
	ErrRevoked = errors.New("the API key was revoked")
	// ErrExpired: the key's expiry has passed.
	ErrExpired = errors.New("the API key has expired")
)

// valid is a checked Spec: its role parsed, its expiry as a duration.
type valid struct {
	spec      Spec
	role      model.Role
	expiresIn time.Duration
}

// check refuses the first bad field of sp, naming it; apps are the
// configured apps' names.
func check(sp Spec, apps []string) (valid, error) {
	v := valid{spec: sp}
	if !NamePattern.MatchString(sp.Name) {
		return v, refuse("name", "invalid_name", "name %q must be 1 to 64 letters, digits, '.', '_' or '-'", sp.Name)
	}
	r, ok := model.ParseRole(sp.Role)
	if !ok {
		names := make([]string, 0, len(model.Roles()))
		for _, x := range model.Roles() {
			names = append(names, string(x))
		}
		return v, refuse("role", "unknown_role", "role %q is not one of %s", sp.Role, strings.Join(names, ", "))
	}
	v.role = r
	if sp.Apps != nil {
		if len(sp.Apps) == 0 {
			return v, refuse("apps", "invalid_apps", "apps is empty: leave it out for every app, or name at least one")
		}
		for i, a := range sp.Apps {
			if !slices.Contains(apps, a) {
				return v, refuse(fmt.Sprintf("apps[%d]", i), "unknown_app", "app %q is not configured (the apps are %s)", a, strings.Join(apps, ", "))
			}
			if slices.Index(sp.Apps, a) != i {
				return v, refuse(fmt.Sprintf("apps[%d]", i), "duplicate_app", "app %q is named twice", a)
			}
		}
	}
	if sp.ExpiresIn != "" {
		d, err := ParseDuration(sp.ExpiresIn)
		if err != nil || d <= 0 {
			return v, refuse("expires_in", "invalid_expires_in", "expires_in %q is not a positive duration such as \"720h\", \"90m\" or \"30d\"", sp.ExpiresIn)
		}
		v.expiresIn = d
	}
	return v, nil
}

// maxExpiry bounds expires_in: far enough for any key, near enough that
// the time stays a DATETIME.
const maxExpiry = 100 * 365 * 24 * time.Hour

// ParseDuration reads a Go duration ("720h", "1h30m") or a whole number
// of days ("30d"), up to 100 years.
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > int64(maxExpiry/(24*time.Hour)) {
			return 0, fmt.Errorf("duration %q: not a whole number of days up to 36500", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: %w", s, err)
	}
	if d > maxExpiry {
		return 0, fmt.Errorf("duration %q: over 100 years", s)
	}
	return d, nil
}

// newSecret returns a fresh key secret and its hash.
func newSecret() (string, [sha256.Size]byte, error) {
	var raw [secretBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", [sha256.Size]byte{}, fmt.Errorf("random secret: %w", err)
	}
	s := Prefix + base64.RawURLEncoding.EncodeToString(raw[:])
	return s, Hash(s), nil
}

// newID returns a fresh public key id ("key_" and 16 hex digits).
func newID() (string, error) {
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("random id: %w", err)
	}
	return "key_" + hex.EncodeToString(raw[:]), nil
}

// Hash is the SHA-256 the table keeps of a secret.
func Hash(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }

// LooksLikeKey reports whether s has a key's form (Prefix and the
// secret's length), so that an environment token is never looked up.
func LooksLikeKey(s string) bool {
	return strings.HasPrefix(s, Prefix) && len(s) == len(Prefix)+base64.RawURLEncoding.EncodedLen(secretBytes)
}
