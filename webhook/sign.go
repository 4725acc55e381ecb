package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// secretPrefix starts every Standard Webhooks secret.
const secretPrefix = "whsec_"

// ParseSecret decodes a "whsec_<base64>" secret into its key.
func ParseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, errors.New("the secret must start with whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New("the secret after whsec_ is not base64")
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("the secret's key has %d bytes; want 24 to 64", len(key))
	}
	return key, nil
}

// Sign is the webhook-signature header of body sent as message id at
// timestamp ts (unix seconds): "v1," and the base64 HMAC-SHA256 of
// "{id}.{ts}.{body}" under key.
func Sign(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
