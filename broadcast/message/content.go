package message

import (
	"encoding/json"

	"pushfan/model"
)

// Overrides are a message's four platform objects (android, apns,
// webpush, fcm_options), checked by FCM's rules and normalised.
type Overrides [4]override

// ParseOverrides checks a request's platform objects; a *FieldError names
// the path at fault (apns.headers.apns-priority).
func ParseOverrides(android, apns, webpush, fcmOptions json.RawMessage) (Overrides, error) {
	p, err := parsePlatform([4]json.RawMessage{android, apns, webpush, fcmOptions})
	return p, err
}

// Size is the bytes the objects add to the payload, with pushfan's
// collapse keys.
func (o Overrides) Size() int { return platformSize(o) }

// CheckTemplates checks their templated strings against the variables the
// audience's rows carry, and pins templated links to their static host.
func (o Overrides) CheckTemplates(vars []string) error { return checkPlatformTemplates(o, vars) }

// Apply returns m carrying them.
func (o Overrides) Apply(m model.Message) (model.Message, error) { return platformMessage(m, o) }
