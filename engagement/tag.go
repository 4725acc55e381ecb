package engagement

import (
	"strings"
	"time"

	"pushfan/model"
)

// Tagger makes the event token of each send: signed now, expiring ttl
// later.
type Tagger struct {
	keys  *Keys
	ttl   time.Duration
	click string
	now   func() time.Time
}

// NewTagger signs with keys' first key, for ttl; publicURL is where apps
// reach pushfan (PUSHFAN_PUBLIC_URL; "": links are sent as they are).
func NewTagger(keys *Keys, ttl time.Duration, publicURL string) *Tagger {
	g := &Tagger{keys: keys, ttl: ttl, now: time.Now}
	if publicURL != "" {
		g.click = strings.TrimSuffix(publicURL, "/") + ClickPath
	}
	return g
}

// ClickPath is the click redirect's path, before the token.
const ClickPath = "/v1/c/"

// ClickURL is the click redirect's URL before the token; "" without a
// public URL.
func (g *Tagger) ClickURL() string { return g.click }

// Tag is the token of one send of broadcast to target (of user), as A/B
// variant and localized variant (0: none), to a device of platform (the
// target's, as its send is counted under it: "" or a name that is none of
// model.Platforms is other, as model.PlatformOf reads it).
func (g *Tagger) Tag(broadcast, target, user uint64, variant, localized int, platform string) string {
	now := g.now()
	return g.keys.Token(Claims{BroadcastID: broadcast, Target: target, UserID: user, Sent: now, Expires: now.Add(g.ttl),
		Variant: variant, Localized: localized, Platform: model.PlatformOf([]byte(platform))})
}

// TestTag is the token of a test send of broadcast (0: of a message not
// stored): verified like any other, and never counted.
func (g *Tagger) TestTag(broadcast uint64) string {
	now := g.now()
	return g.keys.Token(Claims{BroadcastID: broadcast, Sent: now, Expires: now.Add(g.ttl), Test: true})
}
