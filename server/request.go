package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"

	"pushfan/broadcast/rules"
)

// broadcastRequest is the body of POST /push/broadcast: the broadcast as
// the domain's rules read it, and how long to wait for it.
type broadcastRequest struct {
	rules.Spec
	Wait *bool `json:"wait"`
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
		// The request embeds rules.Spec, whose name encoding/json puts
		// in front of the JSON path; the client never wrote it.
		field := strings.TrimPrefix(typ.Field, "Spec.")
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
	case goType == "float64", goType == "*float64":
		return "a number"
	case goType == "bool", goType == "*bool":
		return "true or false"
	case goType == "[]string":
		return "an array of strings"
	case strings.HasPrefix(goType, "[]rules."), strings.HasPrefix(goType, "[]broadcast."): // variants
		return "an array of objects"
	case goType == "rules.QuietHoursSpec":
		return `an object {"start", "end"}, false or null (no quiet hours)`
	case strings.HasPrefix(goType, "*server.") || strings.HasPrefix(goType, "server."),
		strings.HasPrefix(goType, "*broadcast.") || strings.HasPrefix(goType, "broadcast."),
		strings.HasPrefix(goType, "*rules.") || strings.HasPrefix(goType, "rules."):
		return "an object"
	}
	return goType
}
