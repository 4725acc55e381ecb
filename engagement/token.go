package engagement

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math"
	"strings"
	"sync"
	"time"

	"pushfan/model"
)

// The event token is "<kid>.<base64url(payload || mac)>": the key id in
// clear, so that a verifier finds the key, then a binary payload of
// uvarints and a truncated HMAC-SHA256 over the key id and the payload.
// With ids up to 2^42 it is under 80 bytes, well inside the 120 the
// contract allows, and it never carries the FCM token: a leaked event
// token names a target, it cannot address a device.
//
// The payload is version-tagged (its first byte) so that a later format can
// be told apart; every field after it is a uvarint:
//
//	version|flags, broadcast, target, user, sent (unix s), ttl (s), variant, localized
//
// The first byte's low four bits are the version, bit 4 the test flag, and
// its top three bits the target's platform (platformShift): 1 + its index
// in model.Platforms, 0 in a token signed before pushfan put it there.
// Those bits were zero and unread, so the platform costs no byte, and a
// token carrying one verifies on an instance that predates it (which
// counts the event without its platform) as one without does on this.
const (
	tokenVersion  = 1
	flagTest      = 0x10 // a test send's token: verified, never counted
	platformShift = 5    // the platform's bits: 0xe0
	macBytes      = 16   // 128 bits of HMAC-SHA256: forging one is 2^-128 a try
	// MaxTokenBytes is the contract's bound on a token's length.
	MaxTokenBytes = 120
	// maxKeyID bounds a key id: it travels in every token.
	maxKeyID = 16
)

// Claims is what a token says about one send.
type Claims struct {
	BroadcastID uint64
	// Target is the target's cursor: its token row id with the bundled
	// tables, the cursor column of a mapped schema or named audience.
	Target  uint64
	UserID  uint64
	Sent    time.Time // whole seconds
	Expires time.Time // whole seconds
	// Variant is the A/B variant sent, from 1 (0: the broadcast has
	// none); Localized is the localized variant, from 1 in
	// message.VariantNames's order (the default message last; 0: the
	// message has no localized variants).
	Variant   int
	Localized int
	// Platform is the target's platform as its send was counted under
	// (one of model.Platforms), "" when the token does not carry it
	// (signed before pushfan put it there): then the event's platform is
	// not known, and it is never guessed.
	Platform string
	Test     bool // a test send's: never counted
}

// Key is one signing key.
type Key struct {
	ID     string
	Secret []byte
}

// Keys signs with the first key and verifies with all of them, so a key is
// rotated by putting the new one first and dropping the old one once its
// tokens have expired.
type Keys struct {
	signer Key
	macs   map[string]*sync.Pool // per key id, pooled *macState
}

// macState is one key's HMAC with its scratch buffers: signing is on
// every send's path, and with them it allocates only the token string.
type macState struct {
	h       hash.Hash
	prefix  []byte // "kid."
	payload []byte
	sum     []byte
	out     []byte
}

// ErrNoKeys: a Keys needs at least one key.
var ErrNoKeys = errors.New("engagement: no event key")

// NewKeys checks keys (ids [A-Za-z0-9_-]{1,16}, unique; secrets of 32
// bytes or more) and returns them.
func NewKeys(keys []Key) (*Keys, error) {
	if len(keys) == 0 {
		return nil, ErrNoKeys
	}
	k := &Keys{signer: keys[0], macs: map[string]*sync.Pool{}}
	for _, key := range keys {
		if err := CheckKeyID(key.ID); err != nil {
			return nil, err
		}
		if len(key.Secret) < 32 {
			return nil, fmt.Errorf("engagement: key %q: the secret has %d bytes, want at least 32", key.ID, len(key.Secret))
		}
		if _, dup := k.macs[key.ID]; dup {
			return nil, fmt.Errorf("engagement: key id %q given twice", key.ID)
		}
		secret, prefix := key.Secret, []byte(key.ID+".")
		k.macs[key.ID] = &sync.Pool{New: func() any {
			return &macState{h: hmac.New(sha256.New, secret), prefix: prefix, payload: make([]byte, 0, 96),
				sum: make([]byte, 0, sha256.Size), out: make([]byte, 0, MaxTokenBytes)}
		}}
	}
	return k, nil
}

// CheckKeyID says whether id can name a key.
func CheckKeyID(id string) error {
	if id == "" || len(id) > maxKeyID {
		return fmt.Errorf("engagement: key id %q: want 1 to %d characters", id, maxKeyID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("engagement: key id %q: only letters, digits, '-' and '_'", id)
		}
	}
	return nil
}

// SigningKeyID is the id of the key that signs.
func (k *Keys) SigningKeyID() string { return k.signer.ID }

// AppendToken appends c's token to dst.
func (k *Keys) AppendToken(dst []byte, c Claims) []byte {
	pool := k.macs[k.signer.ID]
	m := pool.Get().(*macState)
	defer pool.Put(m)
	return append(dst, m.sign(c)...)
}

// Token is c's token, signed by the first key. It is on every send's path:
// its one allocation is the string.
func (k *Keys) Token(c Claims) string {
	pool := k.macs[k.signer.ID]
	m := pool.Get().(*macState)
	defer pool.Put(m)
	return string(m.sign(c))
}

// sign encodes c's token into m.out and returns it (valid until m's next
// use).
func (m *macState) sign(c Claims) []byte {
	flags := byte(tokenVersion) | model.PlatformCode(c.Platform)<<platformShift
	if c.Test {
		flags |= flagTest
	}
	p := append(m.payload[:0], flags)
	p = binary.AppendUvarint(p, c.BroadcastID)
	p = binary.AppendUvarint(p, c.Target)
	p = binary.AppendUvarint(p, c.UserID)
	sent := c.Sent.Unix()
	p = binary.AppendUvarint(p, uint64(max(sent, 0)))
	p = binary.AppendUvarint(p, uint64(max(c.Expires.Unix()-sent, 0)))
	p = binary.AppendUvarint(p, uint64(max(c.Variant, 0)))
	p = binary.AppendUvarint(p, uint64(max(c.Localized, 0)))
	p = append(p, m.mac(p)...)
	m.payload = p
	m.out = base64.RawURLEncoding.AppendEncode(append(m.out[:0], m.prefix...), p)
	return m.out
}

// mac is the truncated MAC of m's key id and payload (valid until m's
// next use).
func (m *macState) mac(payload []byte) []byte {
	m.h.Reset()
	m.h.Write(m.prefix)
	m.h.Write(payload)
	m.sum = m.h.Sum(m.sum[:0])
	return m.sum[:macBytes]
}

// Refusal codes, as POST /v1/events answers them.
const (
	CodeMalformed    = "malformed"     // not a pushfan event token
	CodeUnknownKey   = "unknown_key"   // signed by a key id this deployment does not have
	CodeBadSignature = "bad_signature" // altered, or signed by another deployment's key
	CodeExpired      = "expired"       // past its expiry (PUSHFAN_EVENT_TTL after the send)
	CodeUnknownType  = "unknown_type"  // not received, opened, clicked or dismissed
	CodeBadTime      = "bad_time"      // "at" is not RFC 3339
)

// Refused is why a token or an event is refused.
type Refused struct{ Code string }

func (r *Refused) Error() string { return "engagement: event refused: " + r.Code }

// Verify checks tok's signature and expiry at now and returns its claims;
// a refusal is a *Refused with its code.
func (k *Keys) Verify(tok string, now time.Time) (Claims, error) {
	if len(tok) > MaxTokenBytes {
		return Claims{}, &Refused{CodeMalformed}
	}
	kid, enc, ok := strings.Cut(tok, ".")
	if !ok || CheckKeyID(kid) != nil {
		return Claims{}, &Refused{CodeMalformed}
	}
	if _, known := k.macs[kid]; !known {
		return Claims{}, &Refused{CodeUnknownKey}
	}
	var buf [MaxTokenBytes]byte
	// Strict: the unused bits of the last character must be zero, or two
	// spellings of one token would both verify.
	raw, err := base64.RawURLEncoding.Strict().AppendDecode(buf[:0], []byte(enc))
	if err != nil || len(raw) < 1+macBytes {
		return Claims{}, &Refused{CodeMalformed}
	}
	payload, mac := raw[:len(raw)-macBytes], raw[len(raw)-macBytes:]
	pool := k.macs[kid]
	m := pool.Get().(*macState)
	ok = hmac.Equal(m.mac(payload), mac)
	pool.Put(m)
	if !ok {
		return Claims{}, &Refused{CodeBadSignature}
	}
	c, ok := decodePayload(payload)
	if !ok {
		return Claims{}, &Refused{CodeMalformed}
	}
	if !now.Before(c.Expires) {
		return c, &Refused{CodeExpired}
	}
	return c, nil
}

// decodePayload reads a signed payload; false when its shape is wrong.
func decodePayload(p []byte) (Claims, bool) {
	if len(p) == 0 || p[0]&0x0f != tokenVersion {
		return Claims{}, false
	}
	var c Claims
	c.Test = p[0]&flagTest != 0
	if code := p[0] >> platformShift; code > 0 {
		if int(code) > len(model.Platforms) {
			return Claims{}, false
		}
		c.Platform = model.Platforms[code-1]
	}
	p = p[1:]
	var f [7]uint64
	for i := range f {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return Claims{}, false
		}
		f[i], p = v, p[n:]
	}
	if len(p) != 0 || f[3] > 1<<40 || f[4] > 1<<40 || f[5] > math.MaxUint8 || f[6] > math.MaxUint16 {
		return Claims{}, false
	}
	c.BroadcastID, c.Target, c.UserID = f[0], f[1], f[2]
	c.Sent = time.Unix(int64(f[3]), 0)
	c.Expires = c.Sent.Add(time.Duration(f[4]) * time.Second)
	c.Variant, c.Localized = int(f[5]), int(f[6])
	return c, true
}
