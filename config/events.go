package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// MaxEventTTL bounds PUSHFAN_EVENT_TTL.
const MaxEventTTL = 365 * 24 * time.Hour

// EventKey is one parsed PUSHFAN_EVENT_KEYS pair.
type EventKey struct {
	ID     string
	Secret string
}

// ParseEventKeys reads PUSHFAN_EVENT_KEYS pairs "kid:secret": key ids of
// 1 to 16 letters, digits, '-' or '_', unique; secrets of 32 bytes or more.
func ParseEventKeys(pairs []string) ([]EventKey, error) {
	seen := map[string]bool{}
	out := make([]EventKey, 0, len(pairs))
	for i, p := range pairs {
		kid, secret, ok := strings.Cut(p, ":")
		switch {
		case !ok:
			return nil, fmt.Errorf("key %d is not kid:secret", i+1)
		case !keyID(kid):
			return nil, fmt.Errorf("key %d: the key id %q must be 1 to 16 letters, digits, '-' or '_'", i+1, kid)
		case len(secret) < 32:
			return nil, fmt.Errorf("key %q: the secret has %d bytes, want at least 32 (e.g. openssl rand -base64 32)", kid, len(secret))
		case seen[kid]:
			return nil, fmt.Errorf("key id %q is given twice", kid)
		}
		seen[kid] = true
		out = append(out, EventKey{ID: kid, Secret: secret})
	}
	return out, nil
}

func keyID(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// TrackingOn reports whether event tokens are on for the deployment.
func (e Events) TrackingOn() bool { return e.Tracking != "off" }

// validate checks the events settings; retention is PUSHFAN_RETENTION.
func (e Events) validate(retention time.Duration, bad func(name, format string, args ...any)) {
	// A token must expire before its broadcast's events are deleted with
	// it: a replay after that would be counted again.
	if retention > 0 && e.TTL >= retention {
		bad("PUSHFAN_EVENT_TTL", "must be shorter than PUSHFAN_RETENTION (%v), got %v: events are deleted with their broadcast, and a token still valid then could count again", retention, e.TTL)
	}
	if _, err := ParseEventKeys(e.Keys); err != nil {
		bad("PUSHFAN_EVENT_KEYS", "%v", err)
	}
	for _, o := range e.Origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			bad("PUSHFAN_EVENT_ORIGINS", "%q is not an origin like https://app.example.com (or *)", o)
		}
	}
	if e.PerAddress <= 0 || e.PerAddress > 1e6 {
		bad("PUSHFAN_EVENT_RATE_PER_ADDRESS", "must be above 0 and at most 1000000, got %v", e.PerAddress)
	}
	if e.PublicURL != "" {
		u, err := url.Parse(e.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			bad("PUSHFAN_PUBLIC_URL", "%q is not an http(s) URL like https://push.example.com", e.PublicURL)
		}
	}
}
