package rules

import (
	"bytes"
	"encoding/json"
	"reflect"

	"pushfan/model"
)

// QuietHoursSpec is a request's (or a job's) quiet_hours as written. Its
// zero value is the field left out: the deployment's default quiet hours
// (PUSHFAN_QUIET_HOURS) apply, except to a transactional broadcast, which
// a default never delays (a one-time code at 23:00 must go at 23:00).
// Window is a window the request asks for; it applies whatever the class,
// since it was asked for. Off is false or null: no quiet hours at all, not
// even the default.
type QuietHoursSpec struct {
	Window *model.QuietHours
	Off    bool
}

// UnmarshalJSON reads an object {start, end}, false or null. encoding/json
// calls it for null too (the field is not a pointer), which is how a null
// is told apart from a field left out. A wrong type is an
// *json.UnmarshalTypeError, which the decoder gives the field's path, so
// the 400 names quiet_hours (or quiet_hours.start) as for any other field.
func (q *QuietHoursSpec) UnmarshalJSON(raw []byte) error {
	v := bytes.TrimSpace(raw)
	switch {
	case string(v) == "null" || string(v) == "false":
		*q = QuietHoursSpec{Off: true}
		return nil
	case len(v) > 0 && v[0] == '{':
		var w model.QuietHours
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields() // as strict as the request around it
		if err := dec.Decode(&w); err != nil {
			return err
		}
		*q = QuietHoursSpec{Window: &w}
		return nil
	}
	return &json.UnmarshalTypeError{Value: quietKind(v), Type: reflect.TypeFor[QuietHoursSpec]()}
}

// quietKind names a JSON value's kind for a type error, as encoding/json
// does ("string", "number"), and true by itself: only false switches quiet
// hours off, so the error says which boolean it got.
func quietKind(v []byte) string {
	switch {
	case len(v) == 0:
		return "nothing"
	case string(v) == "true":
		return "true"
	case v[0] == '"':
		return "string"
	case v[0] == '[':
		return "array"
	}
	return "number"
}
