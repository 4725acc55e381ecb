package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/url"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"pushfan/audience"
	"pushfan/broadcast"
	"pushfan/repository"
)

// MaxPayloadBytes is FCM's limit on a message's payload, measured as the
// compact JSON {"data":...,"notification":...} (null when absent), exactly
// as the bundled emulator measures it.
const MaxPayloadBytes = 4096

// broadcastRequest is the body of POST /push/broadcast.
type broadcastRequest struct {
	Title              string            `json:"title"`
	Body               string            `json:"body"`
	Image              string            `json:"image"`
	Data               map[string]string `json:"data"`
	Audience           *audienceRequest  `json:"audience"`
	DryRun             bool              `json:"dry_run"`
	SendAt             string            `json:"send_at"`
	InvalidateOnDryRun bool              `json:"invalidate_on_dry_run"`
	Wait               *bool             `json:"wait"`
}

type audienceRequest struct {
	All     bool           `json:"all"`
	UserIDs []uint64       `json:"user_ids"`
	Name    string         `json:"name"`
	Params  map[string]any `json:"params"`
}

// decodeStrict decodes exactly one JSON object into v, refusing unknown
// fields, wrong types and trailing data with a 400 that names the field.
func decodeStrict(body io.Reader, v any) error {
	raw, err := io.ReadAll(body)
	if err != nil {
		return err // the body limit's 413 passes through
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return badRequest("empty_body", "", "the request body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return badRequest("malformed_json", "", "the request body has data after the JSON object")
	}
	return nil
}

func jsonError(err error) *APIError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return badRequest("malformed_json", "", "the request body is not valid JSON: %s at byte %d", syn.Error(), syn.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return badRequest("invalid_type", "", "the request body must be a JSON object, not %s", typ.Value)
		}
		if field == "data" && typ.Type.Kind() == reflect.String {
			// encoding/json names the map, not the key, for a bad map value.
			return badRequest("invalid_type", field, "every value in data must be a string (FCM data values are strings), got %s", typ.Value)
		}
		return badRequest("invalid_type", field, "field %q must be %s, got %s", field, typeName(typ.Type.String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed_json", "", "the request body is truncated JSON")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return badRequest("unknown_field", name, "unknown field %q", name)
	}
	return badRequest("malformed_json", "", "the request body could not be decoded: %v", err)
}

func typeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map[string]string"):
		return "an object of string values"
	case strings.HasPrefix(goType, "[]uint64"):
		return "an array of positive integers"
	case goType == "uint64":
		return "a positive integer"
	case goType == "string":
		return "a string"
	case goType == "bool", goType == "*bool":
		return "true or false"
	case strings.HasPrefix(goType, "*server.") || strings.HasPrefix(goType, "server."):
		return "an object"
	}
	return goType
}

// validate turns a decoded request into a service request, or a 400 naming
// the broken rule. It runs before anything is stored or sent.
func (r *broadcastRequest) validate(maxUserIDs int) (broadcast.Request, error) {
	return r.validateAt(maxUserIDs, time.Time{}, 0, nil)
}

// validateAt is validate with the clock, the scheduling horizon (a zero
// now refuses send_at) and the named audiences.
func (r *broadcastRequest) validateAt(maxUserIDs int, now time.Time, horizon time.Duration, named map[string]*audience.Audience) (broadcast.Request, error) {
	var out broadcast.Request
	if r.Title == "" && r.Body == "" && len(r.Data) == 0 {
		return out, badRequest("empty_message", "", "the message is empty: set at least one of title, body or data")
	}
	for field, v := range map[string]string{"title": r.Title, "body": r.Body, "image": r.Image} {
		if !utf8.ValidString(v) {
			return out, badRequest("invalid_value", field, "%s is not valid UTF-8", field)
		}
	}
	if r.Image != "" {
		u, err := url.Parse(r.Image)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return out, badRequest("invalid_value", "image", "image must be an http(s) URL")
		}
	}
	for k := range r.Data {
		if err := checkDataKey(k); err != nil {
			return out, err
		}
	}
	if n := payloadSize(r.Title, r.Body, r.Image, r.Data); n > MaxPayloadBytes {
		return out, badRequest("payload_too_large", "", "the message payload is %d bytes; FCM allows at most %d (title, body, image and data together)", n, MaxPayloadBytes)
	}
	a, vars, err := r.audience(maxUserIDs, named)
	if err != nil {
		return out, err
	}
	if _, err := audience.ParseTemplate(r.Title, r.Body, r.Data, vars); err != nil {
		var te *audience.TemplateError
		if errors.As(err, &te) {
			return out, badRequest("template_error", te.Field, "%v", err)
		}
		return out, badRequest("template_error", "", "%v", err)
	}
	if r.InvalidateOnDryRun && !r.DryRun {
		return out, badRequest("invalid_value", "invalidate_on_dry_run", "invalidate_on_dry_run only applies with dry_run: true (a real send always invalidates dead tokens)")
	}
	var sendAt *time.Time
	if r.SendAt != "" {
		t, err := time.Parse(time.RFC3339Nano, r.SendAt)
		if err != nil {
			return out, badRequest("invalid_value", "send_at", "send_at must be an RFC 3339 time with an offset, e.g. 2026-12-01T18:00:00+09:00")
		}
		switch {
		case now.IsZero():
			return out, badRequest("invalid_value", "send_at", "send_at is not accepted here")
		case !t.After(now):
			return out, badRequest("send_at_in_past", "send_at", "send_at %s is not in the future (now is %s)", t.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		case t.Sub(now) > horizon:
			return out, badRequest("send_at_too_far", "send_at", "send_at is more than %v ahead; the limit is PUSHFAN_SCHEDULE_HORIZON", horizon)
		}
		u := t.UTC()
		sendAt = &u
	}
	out = broadcast.Request{
		SendAt:             sendAt,
		Message:            repository.Message{Title: r.Title, Body: r.Body, Image: r.Image, Data: r.Data},
		Audience:           a,
		DryRun:             r.DryRun,
		InvalidateOnDryRun: r.InvalidateOnDryRun,
	}
	return out, nil
}

// checkDataKey refuses the keys FCM reserves.
func checkDataKey(k string) error {
	lk := strings.ToLower(k)
	switch {
	case k == "":
		return badRequest("reserved_data_key", "data", "data keys must not be empty")
	case lk == "from" || lk == "message_type" || lk == "notification":
		return badRequest("reserved_data_key", "data."+k, "data key %q is reserved by FCM", k)
	case strings.HasPrefix(lk, "google.") || strings.HasPrefix(lk, "gcm."):
		return badRequest("reserved_data_key", "data."+k, "data key %q is reserved by FCM (keys starting with google. or gcm.)", k)
	}
	return nil
}

// audience validates the audience and returns the template variables its
// rows carry (none for the built-in audiences).
func (r *broadcastRequest) audience(maxUserIDs int, named map[string]*audience.Audience) (repository.Audience, []string, error) {
	a := r.Audience
	none := []string{}
	set := 0
	if a != nil {
		for _, b := range []bool{a.All, len(a.UserIDs) > 0, a.Name != ""} {
			if b {
				set++
			}
		}
	}
	switch {
	case a == nil:
		return repository.Audience{}, nil, badRequest("missing_field", "audience", `audience is required: {"all": true}, {"user_ids": [...]} or {"name": "...", "params": {...}}`)
	case set > 1:
		return repository.Audience{}, nil, badRequest("invalid_value", "audience", "audience must set exactly one of all, user_ids or name")
	case a.Params != nil && a.Name == "":
		return repository.Audience{}, nil, badRequest("invalid_value", "audience.params", "params only apply to a named audience")
	case a.Name != "":
		return namedAudience(a, named)
	case a.All:
		return repository.Audience{All: true}, none, nil
	case len(a.UserIDs) == 0:
		return repository.Audience{}, nil, badRequest("empty_audience", "audience", `the audience is empty: set {"all": true} or a non-empty user_ids list`)
	case len(a.UserIDs) > maxUserIDs:
		return repository.Audience{}, nil, badRequest("too_many_user_ids", "audience.user_ids", "audience.user_ids has %d ids; at most %d are allowed per broadcast", len(a.UserIDs), maxUserIDs)
	}
	seen := make(map[uint64]struct{}, len(a.UserIDs))
	ids := make([]uint64, 0, len(a.UserIDs))
	for _, id := range a.UserIDs {
		if id == 0 {
			return repository.Audience{}, nil, badRequest("invalid_value", "audience.user_ids", "user ids must be positive integers; got 0")
		}
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			ids = append(ids, id)
		}
	}
	return repository.Audience{UserIDs: ids}, none, nil
}

// namedAudience binds a named audience's parameters (typed, never
// interpolated into SQL).
func namedAudience(a *audienceRequest, named map[string]*audience.Audience) (repository.Audience, []string, error) {
	na, ok := named[a.Name]
	if !ok {
		return repository.Audience{}, nil, badRequest("unknown_audience", "audience.name", "no audience named %q is configured (GET /push/audiences lists them)", a.Name)
	}
	bound, err := na.Bind(a.Params)
	if err != nil {
		var pe *audience.ParamError
		if errors.As(err, &pe) {
			field := "audience.params"
			if ps := pe.Params(); len(ps) == 1 {
				field += "." + ps[0]
			}
			return repository.Audience{}, nil, badRequest("invalid_params", field, "%v", err)
		}
		return repository.Audience{}, nil, badRequest("invalid_params", "audience.params", "%v", err)
	}
	raw, err := bound.ParamsJSON()
	if err != nil {
		return repository.Audience{}, nil, badRequest("invalid_params", "audience.params", "%v", err)
	}
	vars := na.Vars()
	if vars == nil {
		vars = []string{}
	}
	return repository.Audience{Name: a.Name, Params: raw}, vars, nil
}

// payloadSize measures the payload as FCM does for its 4096-byte limit:
// the notification and data objects, as compact JSON.
func payloadSize(title, body, image string, data map[string]string) int {
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
