package webhook

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
)

// Event types.
const (
	BroadcastStarted    = "broadcast.started"
	BroadcastHeld       = "broadcast.held"
	BroadcastFinished   = "broadcast.finished"
	TokensInvalidated   = "tokens.invalidated"
	BroadcastEngagement = "broadcast.engagement"
)

// Types are every event type an endpoint may ask for.
var Types = []string{BroadcastStarted, BroadcastHeld, BroadcastFinished, TokensInvalidated, BroadcastEngagement}

// Endpoint is one receiver of events.
type Endpoint struct {
	Name   string
	URL    string
	key    []byte
	events []string // nil: all
}

// Config is an endpoint as the YAML config gives it.
type Config struct {
	Name   string
	URL    string
	Secret string
	Events []string
}

var endpointName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Compile checks the endpoints (names unique and well formed, http(s)
// URLs, whsec_ secrets, known event types) and returns them; errors name
// the endpoint and never carry a secret.
func Compile(cs []Config) ([]*Endpoint, error) {
	seen := map[string]bool{}
	out := make([]*Endpoint, 0, len(cs))
	for i, c := range cs {
		where := fmt.Sprintf("webhooks[%d]", i)
		if !endpointName.MatchString(c.Name) {
			return nil, fmt.Errorf("%s: name %q must be 1 to 64 of a-z, 0-9, _ and -", where, c.Name)
		}
		where = fmt.Sprintf("webhooks %q", c.Name)
		if seen[c.Name] {
			return nil, fmt.Errorf("%s: the name is given twice", where)
		}
		seen[c.Name] = true
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return nil, fmt.Errorf("%s: url must be an http(s) URL without credentials", where)
		}
		key, err := ParseSecret(c.Secret)
		if err != nil {
			return nil, fmt.Errorf("%s: secret: %w", where, err)
		}
		for _, t := range c.Events {
			if !slices.Contains(Types, t) {
				return nil, fmt.Errorf("%s: event %q is none of %v", where, t, Types)
			}
		}
		out = append(out, &Endpoint{Name: c.Name, URL: c.URL, key: key, events: slices.Clone(c.Events)})
	}
	return out, nil
}

// Wants reports whether e takes events of type t.
func (e *Endpoint) Wants(t string) bool { return len(e.events) == 0 || slices.Contains(e.events, t) }

// Sign is the webhook-signature of body as message id at ts, under e's key.
func (e *Endpoint) Sign(id string, ts int64, body []byte) string { return Sign(e.key, id, ts, body) }
