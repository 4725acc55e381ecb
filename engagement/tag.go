package engagement

import "time"

// Tagger makes the event token of each send: signed now, expiring ttl
// later.
type Tagger struct {
	keys *Keys
	ttl  time.Duration
	now  func() time.Time
}

// NewTagger signs with keys' first key, for ttl.
func NewTagger(keys *Keys, ttl time.Duration) *Tagger {
	return &Tagger{keys: keys, ttl: ttl, now: time.Now}
}

// Tag is the token of one send of broadcast to target (of user), as A/B
// variant and localized variant (0: none).
func (g *Tagger) Tag(broadcast, target, user uint64, variant, localized int) string {
	now := g.now()
	return g.keys.Token(Claims{BroadcastID: broadcast, Target: target, UserID: user, Sent: now, Expires: now.Add(g.ttl),
		Variant: variant, Localized: localized})
}

// TestTag is the token of a test send of broadcast (0: of a message not
// stored): verified like any other, and never counted.
func (g *Tagger) TestTag(broadcast uint64) string {
	now := g.now()
	return g.keys.Token(Claims{BroadcastID: broadcast, Sent: now, Expires: now.Add(g.ttl), Test: true})
}
