package fcmemu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxPayloadBytes is FCM's limit on the message payload; see the package documentation for how
// the emulator measures it.
const MaxPayloadBytes = 4096

// Texts of the rejections a client may want to match. The token one is FCM's own wording.
const (
	msgInvalidToken = "The registration token is not a valid FCM registration token"
	fieldToken      = "message.token"
)

// sendRequest is the envelope of a send call, decoded in one pass. validateOnly is accepted too
// because proto3 JSON parsers, FCM's included, take both spellings.
type sendRequest struct {
	Message       *wireMessage `json:"message"`
	ValidateOnly  bool         `json:"validate_only"`
	ValidateOnly2 bool         `json:"validateOnly"`
}

// wireMessage holds only what the emulator checks; the decoder skips everything else in the
// message. Pointers tell an absent target from an empty one.
type wireMessage struct {
	Token     *string                    `json:"token"`
	Topic     *string                    `json:"topic"`
	Condition *string                    `json:"condition"`
	Data      map[string]json.RawMessage `json:"data"`
}

// parsedSend is a decoded send request. token is set whenever the request named a token, even
// an invalid one, so that attempts count every request naming it.
type parsedSend struct {
	token        string
	hasToken     bool
	validateOnly bool
	reject       *rejection // nil when the request is valid
	// msg is the message of a send to a watched phone (devices.go), kept
	// to hand to it once accepted.
	msg json.RawMessage
}

// rejection is a 400 INVALID_ARGUMENT: which field and which rule.
type rejection struct {
	field string
	msg   string
}

func reject(field, format string, args ...any) *rejection {
	return &rejection{field: field, msg: fmt.Sprintf(format, args...)}
}

// parseSend decodes and validates body.
func parseSend(body []byte) parsedSend {
	var req sendRequest
	if err := json.Unmarshal(body, &req); err != nil {
		p := parsedSend{reject: jsonRejection(err)}
		// Still attribute the attempt to the token when one can be read.
		var t struct {
			Message struct {
				Token string `json:"token"`
			} `json:"message"`
		}
		if json.Unmarshal(body, &t) == nil && t.Message.Token != "" {
			p.token, p.hasToken = t.Message.Token, true
		}
		return p
	}
	p := parsedSend{validateOnly: req.ValidateOnly || req.ValidateOnly2}
	m := req.Message
	if m == nil {
		p.reject = reject("message", "Invalid JSON payload received. The message is missing.")
		return p
	}
	if m.Token != nil {
		p.token, p.hasToken = *m.Token, true
	}
	p.reject = validateMessage(m, body)
	return p
}

// validateMessage applies FCM's rules in the order FCM reports them: recipient, payload, then
// the token itself, so that a message with both a bad payload and a bad token is reported as a
// message problem (the token may be fine).
func validateMessage(m *wireMessage, body []byte) *rejection {
	targets := 0
	for _, t := range []*string{m.Token, m.Topic, m.Condition} {
		if t != nil && *t != "" {
			targets++
		}
	}
	switch {
	case targets > 1:
		return reject("message", "Exactly one of message.token, message.topic or message.condition must be set, got %d.", targets)
	case targets == 0 && m.Token != nil:
		// "token": "" with no other target: the client meant a token and it is empty.
		return reject(fieldToken, msgInvalidToken)
	case targets == 0:
		return reject("message", "Recipient of the message is not set.")
	}
	if m.Topic != nil && *m.Topic != "" && !validTopic(*m.Topic) {
		return reject("message.topic", "Invalid topic name %q.", *m.Topic)
	}
	if n := payloadSize(body); n > MaxPayloadBytes {
		return reject("message", "Message is too big: the payload is %d bytes, the limit is %d bytes.", n, MaxPayloadBytes)
	}
	for k, v := range m.Data {
		if reservedDataKey(k) {
			return reject("message.data", "Invalid data payload key %q: it is a reserved word (from, message_type, google.*, gcm.*).", k)
		}
		if len(v) == 0 || v[0] != '"' {
			return reject("message.data", "Invalid value at 'message.data[%s].value' (TYPE_STRING): data values must be strings, got %s.",
				strconv.Quote(k), truncate(string(v), 40))
		}
	}
	if m.Token != nil && *m.Token != "" && !validToken(*m.Token) {
		return reject(fieldToken, msgInvalidToken)
	}
	return nil
}

// payloadSize is what FCM's 4096-byte limit applies to: the whole message
// but its target, as compact JSON {"data":...,"notification":...} (null
// when absent) followed by ,"android":...,"apns":...,"webpush":...,
// "fcm_options":... for those present. The platform objects count, collapse
// keys included: they travel with the message to the device. A body at or
// under the limit cannot hold an oversized payload, so it is not re-read.
func payloadSize(body []byte) int {
	if len(body) <= MaxPayloadBytes {
		return len(body)
	}
	var env struct {
		Message struct {
			Data         json.RawMessage `json:"data,omitempty"`
			Notification json.RawMessage `json:"notification,omitempty"`
			Android      json.RawMessage `json:"android,omitempty"`
			APNS         json.RawMessage `json:"apns,omitempty"`
			Webpush      json.RawMessage `json:"webpush,omitempty"`
			FCMOptions   json.RawMessage `json:"fcm_options,omitempty"`
		} `json:"message"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return len(body) // unreachable: body was just decoded
	}
	m := env.Message
	var compact bytes.Buffer
	compact.WriteString(`{"data":`)
	if err := json.Compact(&compact, orNull(m.Data)); err != nil {
		return len(body)
	}
	compact.WriteString(`,"notification":`)
	if err := json.Compact(&compact, orNull(m.Notification)); err != nil {
		return len(body)
	}
	for _, o := range [...]struct {
		name string
		raw  json.RawMessage
	}{{"android", m.Android}, {"apns", m.APNS}, {"webpush", m.Webpush}, {"fcm_options", m.FCMOptions}} {
		if len(o.raw) == 0 || string(o.raw) == "null" {
			continue
		}
		compact.WriteString(`,"` + o.name + `":`)
		if err := json.Compact(&compact, o.raw); err != nil {
			return len(body)
		}
	}
	compact.WriteByte('}')
	return compact.Len()
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// reservedDataKey reports keys FCM refuses in message.data.
func reservedDataKey(k string) bool {
	return k == "from" || k == "message_type" || strings.HasPrefix(k, "google.") || strings.HasPrefix(k, "gcm.")
}

// validToken accepts the alphabet real registration tokens use ("cX...:APA91b..."), and refuses
// the invalid- prefix so tests can send syntactically bad tokens on purpose.
func validToken(t string) bool {
	if strings.HasPrefix(t, "invalid-") {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == ':', c == '.':
		default:
			return false
		}
	}
	return true
}

// validTopic follows the SDK's topic pattern ^(/topics/)?[a-zA-Z0-9-_.~%]+$.
func validTopic(t string) bool {
	t = strings.TrimPrefix(t, "/topics/")
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '.', c == '~', c == '%':
		default:
			return false
		}
	}
	return true
}

// jsonRejection words a decoding error like FCM's "Invalid JSON payload received." answers,
// naming the field (its full path, e.g. message.data) when the decoder knows it (a wrong type);
// a wrong type on token is a token cause, like any other token problem.
func jsonRejection(err error) *rejection {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		if te.Field == fieldToken {
			return reject(fieldToken, msgInvalidToken)
		}
		return reject(te.Field, "Invalid value at '%s': expected %s, got a JSON %s.", te.Field, te.Type, te.Value)
	}
	return reject("", "Invalid JSON payload received. %s", err.Error())
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
