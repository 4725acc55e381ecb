package engagement

import (
	"bytes"
	"encoding/base64"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"pushfan/model"
)

func testKeys(t *testing.T, keys ...Key) *Keys {
	t.Helper()
	k, err := NewKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	keyA = Key{ID: "a1", Secret: bytes.Repeat([]byte("A"), 32)}
	keyB = Key{ID: "b2", Secret: bytes.Repeat([]byte("B"), 32)}
)

func refusal(err error) string {
	var r *Refused
	if errors.As(err, &r) {
		return r.Code
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return ""
}

func TestTokensRoundTripAndStaySmall(t *testing.T) {
	k := testKeys(t, keyA)
	sent := time.Unix(1_800_000_000, 0)
	for _, c := range []Claims{
		{BroadcastID: 1, Target: 2, UserID: 3, Sent: sent, Expires: sent.Add(7 * 24 * time.Hour)},
		{BroadcastID: math.MaxUint64, Target: math.MaxUint64, UserID: math.MaxUint64, Sent: sent, Expires: sent.Add(365 * 24 * time.Hour), Variant: 5, Localized: 255, Test: true},
		{BroadcastID: math.MaxUint64, Target: math.MaxUint64, UserID: math.MaxUint64, Sent: sent, Expires: sent.Add(365 * 24 * time.Hour), Variant: 255, Localized: math.MaxUint16, Platform: model.PlatformOther, Test: true},
		{BroadcastID: 1, Target: 2, UserID: 3, Sent: sent, Expires: sent.Add(2 * time.Hour), Platform: model.PlatformAndroid},
		{BroadcastID: 1, Target: 2, UserID: 3, Sent: sent, Expires: sent.Add(2 * time.Hour), Platform: model.PlatformIOS},
		{BroadcastID: 1, Target: 2, UserID: 3, Sent: sent, Expires: sent.Add(2 * time.Hour), Platform: model.PlatformWeb},
	} {
		tok := k.Token(c)
		if len(tok) > MaxTokenBytes {
			t.Errorf("token of %+v has %d bytes, over %d", c, len(tok), MaxTokenBytes)
		}
		got, err := k.Verify(tok, sent.Add(time.Hour))
		if err != nil {
			t.Fatalf("verify %q: %v", tok, err)
		}
		if got != c {
			t.Errorf("round trip: got %+v, want %+v", got, c)
		}
	}
}

// The platform rides in the first byte's spare bits: a token with one is
// no longer than one without, a token signed before (this one, by the
// release before the platform was put in) still verifies, its platform
// not known, and a platform code no release writes is malformed.
func TestTokensCarryThePlatformInNoMoreBytes(t *testing.T) {
	k := testKeys(t, keyA)
	sent := time.Unix(1_800_000_000, 0)
	c := Claims{BroadcastID: 42, Target: 7, UserID: 9, Sent: sent, Expires: sent.Add(time.Hour), Variant: 1, Localized: 2}
	const old = "a1.ASoHCYCkp9oGkBwBAh_q9MIxHU194FxiLBsZGU4" // c, signed by the release before
	if got := k.Token(c); got != old {
		t.Fatalf("a token without a platform: %q, want the old release's %q", got, old)
	}
	got, err := k.Verify(old, sent)
	if err != nil || got != c || got.Platform != "" {
		t.Fatalf("the old release's token: %+v %v, want %+v with no platform", got, err, c)
	}
	for _, p := range model.Platforms {
		withP := c
		withP.Platform = p
		tok := k.Token(withP)
		if len(tok) != len(old) {
			t.Errorf("%s: %d bytes, want %d as without a platform", p, len(tok), len(old))
		}
		if got, err := k.Verify(tok, sent); err != nil || got.Platform != p {
			t.Errorf("%s: verified as %+v %v", p, got, err)
		}
	}
	// Codes 5 to 7 are no platform: signed (by this deployment's key),
	// still malformed.
	m := k.macs[keyA.ID].Get().(*macState)
	payload := append([]byte{tokenVersion | 5<<platformShift}, 42, 7, 9, 1, 1, 1, 2)
	forged := keyA.ID + "." + base64.RawURLEncoding.EncodeToString(append(payload, m.mac(payload)...))
	if _, err := k.Verify(forged, time.Unix(0, 0)); refusal(err) != CodeMalformed {
		t.Fatalf("platform code 5: %v, want %s", err, CodeMalformed)
	}
}

func TestTokensRefuseWhatTheyMust(t *testing.T) {
	k := testKeys(t, keyA)
	sent := time.Unix(1_800_000_000, 0)
	c := Claims{BroadcastID: 7, Target: 8, UserID: 9, Sent: sent, Expires: sent.Add(time.Hour)}
	tok := k.Token(c)
	flipped := []byte(tok)
	flipped[len(flipped)-5] ^= 1
	if flipped[len(flipped)-5] == '.' || flipped[len(flipped)-5] > 'z' {
		flipped[len(flipped)-5] = 'x'
	}
	other := testKeys(t, Key{ID: "a1", Secret: bytes.Repeat([]byte("Z"), 32)}) // another deployment, same key id
	unknown := testKeys(t, Key{ID: "zz", Secret: bytes.Repeat([]byte("A"), 32)})
	for _, tc := range []struct {
		name, tok string
		now       time.Time
		want      string
	}{
		{"genuine", tok, sent, ""},
		{"one byte flipped", string(flipped), sent, CodeBadSignature},
		{"another deployment's key", other.Token(c), sent, CodeBadSignature},
		{"an unknown key id", unknown.Token(c), sent, CodeUnknownKey},
		{"expired", tok, sent.Add(time.Hour), CodeExpired},
		{"empty", "", sent, CodeMalformed},
		{"no key id", "." + strings.SplitN(tok, ".", 2)[1], sent, CodeMalformed},
		{"not base64", "a1.!!!!", sent, CodeMalformed},
		{"too long", tok + strings.Repeat("A", MaxTokenBytes), sent, CodeMalformed},
		{"truncated by a byte", truncateByte(tok), sent, CodeBadSignature},
		{"the last character's unused bits set", lastBits(tok), sent, CodeMalformed},
	} {
		_, err := k.Verify(tc.tok, tc.now)
		if got := refusal(err); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestKeysRotate(t *testing.T) {
	sent := time.Unix(1_800_000_000, 0)
	c := Claims{BroadcastID: 1, Target: 1, UserID: 1, Sent: sent, Expires: sent.Add(time.Hour)}
	old := testKeys(t, keyA).Token(c)
	rotated := testKeys(t, keyB, keyA) // b2 signs now; a1 still verifies
	if _, err := rotated.Verify(old, sent); err != nil {
		t.Fatalf("a token of the old key: %v", err)
	}
	fresh := rotated.Token(c)
	if !strings.HasPrefix(fresh, "b2.") {
		t.Fatalf("the first key signs: got %q", fresh)
	}
	if _, err := testKeys(t, keyA).Verify(fresh, sent); refusal(err) != CodeUnknownKey {
		t.Fatalf("the old set does not know b2: %v", err)
	}
}

func TestNewKeysRefusesBadKeys(t *testing.T) {
	for _, keys := range [][]Key{
		nil,
		{{ID: "a1", Secret: []byte("short")}},
		{{ID: "", Secret: keyA.Secret}},
		{{ID: "has.dot", Secret: keyA.Secret}},
		{keyA, keyA},
	} {
		if _, err := NewKeys(keys); err == nil {
			t.Errorf("NewKeys(%v) took them", keys)
		}
	}
}

// Signing is on every send's path.
func BenchmarkAppendToken(b *testing.B) {
	k, _ := NewKeys([]Key{keyA})
	sent := time.Now()
	c := Claims{BroadcastID: 123456, Target: 9_876_543, UserID: 5_555_555, Sent: sent, Expires: sent.Add(7 * 24 * time.Hour), Platform: model.PlatformIOS}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		buf = k.AppendToken(buf[:0], c)
	}
}

// lastBits respells tok's last character with its unused low bits set: the
// same bytes under a lax decoder, a different string.
func lastBits(tok string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	enc := tok[strings.IndexByte(tok, '.')+1:]
	unused := map[int]int{2: 4, 3: 2}[len(enc)%4] // bits of the last character no byte uses
	if unused == 0 {
		return tok + "A" // no unused bits: a character too many is malformed as well
	}
	i := strings.IndexByte(alphabet, tok[len(tok)-1])
	return tok[:len(tok)-1] + string(alphabet[i|(1<<unused-1)])
}

// truncateByte drops tok's last byte and re-encodes it strictly: a token
// that decodes, whose MAC no longer matches.
func truncateByte(tok string) string {
	dot := strings.IndexByte(tok, '.')
	raw, err := base64.RawURLEncoding.DecodeString(tok[dot+1:])
	if err != nil {
		panic(err)
	}
	return tok[:dot+1] + base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1])
}

// Tag is what a send calls: the platform read in any case allocates
// nothing more than the token's string.
func BenchmarkTag(b *testing.B) {
	k, _ := NewKeys([]Key{keyA})
	g := NewTagger(k, 7*24*time.Hour, "")
	b.ReportAllocs()
	for b.Loop() {
		_ = g.Tag(123456, 9_876_543, 5_555_555, 1, 2, "IOS")
	}
}
