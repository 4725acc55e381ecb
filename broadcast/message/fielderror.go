package message

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// MaxPayloadBytes is FCM's limit on a message's payload, measured as the
// compact JSON {"data":...,"notification":...} (null when absent) followed
// by ,"android":...,"apns":...,"webpush":...,"fcm_options":... for those
// present, exactly as the bundled emulator measures it.
const MaxPayloadBytes = 4096

// FieldError is a request rule that a broadcast's request breaks: a stable snake_case
// code, the field at fault ("" when it is the request as a whole), and a
// human sentence. The HTTP layer answers it with a 400.
type FieldError struct {
	Code, Field, Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Code + ": " + e.Message
	}
	return e.Code + " (" + e.Field + "): " + e.Message
}

// FieldErrorf is a FieldError with a formatted message.
func FieldErrorf(code, field, format string, args ...any) *FieldError {
	return &FieldError{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// CheckDataKey refuses the keys FCM reserves.
func CheckDataKey(k string) error {
	lk := strings.ToLower(k)
	switch {
	case k == "":
		return FieldErrorf("reserved_data_key", "data", "data keys must not be empty")
	case lk == TagDataKey:
		return FieldErrorf("reserved_data_key", "data."+k, "data key %q is reserved: it carries the event token the app reports opens with", k)
	case lk == "from" || lk == "message_type" || lk == "notification":
		return FieldErrorf("reserved_data_key", "data."+k, "data key %q is reserved by FCM", k)
	case strings.HasPrefix(lk, "google.") || strings.HasPrefix(lk, "gcm."):
		return FieldErrorf("reserved_data_key", "data."+k, "data key %q is reserved by FCM (keys starting with google. or gcm.)", k)
	}
	return nil
}

// TagDataKey is the data key of the signed event token every tracked
// message carries (package engagement).
const TagDataKey = "pushfan"

// TagBytes is what the event token adds to a payload at most: ,"pushfan":"…"
// with a token of engagement.MaxTokenBytes.
const TagBytes = len(`,"`+TagDataKey+`":""`) + 120

// PayloadSize measures the payload as FCM does for its 4096-byte limit:
// the notification and data objects, as compact JSON.
func PayloadSize(title, body, image string, data map[string]string) int {
	type notification struct {
		Title string `json:"title,omitempty"`
		Body  string `json:"body,omitempty"`
		Image string `json:"image,omitempty"`
	}
	p := struct {
		Data         map[string]string `json:"data"`
		Notification *notification     `json:"notification"`
	}{Data: data}
	if title != "" || body != "" || image != "" {
		p.Notification = &notification{title, body, image}
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return math.MaxInt // unreachable for strings; refuse rather than guess
	}
	return len(raw)
}
