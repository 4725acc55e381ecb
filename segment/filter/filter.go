package filter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Filter is a checked filter: exactly one of And, Or, Not and Cond.
type Filter struct {
	And  []*Filter
	Or   []*Filter
	Not  *Filter
	Cond *Condition
}

// Condition is one checked condition: its field, its operator, and its
// values as Go values of the field's kind (string, int64, bool,
// time.Time, time.Duration; a version as its comparable key; several
// for in and nin; for exists, one bool).
type Condition struct {
	Field  Field
	Op     string
	Values []any
}

// Limits of a filter: deep and wide enough for any campaign a person
// builds, small enough that no filter makes a statement the database
// struggles to parse.
const (
	MaxDepth      = 4    // and, or and not nested
	MaxConditions = 100  // conditions in one filter
	MaxValues     = 1000 // values of one in or nin
	MaxValueBytes = 255  // one string value
)

// Error is a mistake in a filter, at Path (filter.and[2].op): the API
// answers it with a 400 naming the path.
type Error struct {
	Path    string
	Message string
}

func (e *Error) Error() string { return e.Path + ": " + e.Message }

func errorf(path, format string, args ...any) *Error {
	return &Error{Path: path, Message: fmt.Sprintf(format, args...)}
}

// Parse checks raw, a filter's JSON, against fields; path names its place
// in the request ("filter"). Every mistake is an *Error naming where.
func Parse(raw json.RawMessage, fields Fields, path string) (*Filter, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, errorf(path, "required: an object such as {\"field\": \"platform\", \"op\": \"eq\", \"value\": \"android\"}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errorf(path, "not valid JSON: %v", err)
	}
	p := parser{fields: fields}
	return p.node(v, path, 0)
}

type parser struct {
	fields Fields
	conds  int
}

func (p *parser) node(v any, path string, depth int) (*Filter, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errorf(path, "must be an object: {\"and\": [...]}, {\"or\": [...]}, {\"not\": {...}} or {\"field\", \"op\", \"value\"}")
	}
	var group []string
	for _, k := range []string{"and", "or", "not"} {
		if _, ok := obj[k]; ok {
			group = append(group, k)
		}
	}
	if len(group) > 1 || (len(group) == 1 && len(obj) > 1) {
		return nil, errorf(path, "has %s: an object is one of and, or, not, or a condition {field, op, value}", strings.Join(slices.Sorted(keys(obj)), ", "))
	}
	if len(group) == 1 {
		if depth >= MaxDepth {
			return nil, errorf(path+"."+group[0], "nested more than %d deep", MaxDepth)
		}
		if group[0] == "not" {
			child, err := p.node(obj["not"], path+".not", depth+1)
			if err != nil {
				return nil, err
			}
			return &Filter{Not: child}, nil
		}
		list, ok := obj[group[0]].([]any)
		if !ok || len(list) == 0 {
			return nil, errorf(path+"."+group[0], "must be a non-empty array of filters")
		}
		out := make([]*Filter, len(list))
		for i, c := range list {
			f, err := p.node(c, fmt.Sprintf("%s.%s[%d]", path, group[0], i), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = f
		}
		if group[0] == "and" {
			return &Filter{And: out}, nil
		}
		return &Filter{Or: out}, nil
	}
	c, err := p.condition(obj, path)
	if err != nil {
		return nil, err
	}
	return &Filter{Cond: c}, nil
}

func keys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (p *parser) condition(obj map[string]any, path string) (*Condition, error) {
	for k := range obj {
		if k != "field" && k != "op" && k != "value" {
			return nil, errorf(path+"."+k, "unknown key: a condition is {\"field\", \"op\", \"value\"}")
		}
	}
	if p.conds++; p.conds > MaxConditions {
		return nil, errorf(path, "more than %d conditions in one filter", MaxConditions)
	}
	name, ok := obj["field"].(string)
	if !ok {
		return nil, errorf(path+".field", "required: a field name, one of %s", strings.Join(p.fields.Names(), ", "))
	}
	f, ok := p.fields[name]
	if !ok {
		return nil, errorf(path+".field", "%q is not a field here; the fields are %s", clip(name), strings.Join(p.fields.Names(), ", "))
	}
	op, ok := obj["op"].(string)
	if !ok {
		return nil, errorf(path+".op", "required: one of %s", strings.Join(ops[f.Kind], ", "))
	}
	if !slices.Contains(ops[f.Kind], op) {
		return nil, errorf(path+".op", "%q does not apply to %s (a %s); use one of %s", clip(op), name, f.Kind, strings.Join(ops[f.Kind], ", "))
	}
	raw, ok := obj["value"]
	if !ok {
		return nil, errorf(path+".value", "required")
	}
	values, err := p.values(f, op, raw, path+".value")
	if err != nil {
		return nil, err
	}
	return &Condition{Field: f, Op: op, Values: values}, nil
}

// values checks a condition's value against its field's kind and its op.
func (p *parser) values(f Field, op string, raw any, path string) ([]any, error) {
	switch op {
	case "exists":
		b, ok := raw.(bool)
		if !ok {
			return nil, errorf(path, "exists takes true or false")
		}
		return []any{b}, nil
	case "in", "nin":
		list, ok := raw.([]any)
		if !ok || len(list) == 0 {
			return nil, errorf(path, "%s takes a non-empty array of %s values", op, f.Kind)
		}
		if len(list) > MaxValues {
			return nil, errorf(path, "%d values; %s takes at most %d (a longer list is a segment of its own, or a named audience)", len(list), op, MaxValues)
		}
		out := make([]any, len(list))
		for i, v := range list {
			x, err := scalar(f, v, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case "within", "not_within":
		s, ok := raw.(string)
		d, err := ParseDuration(s)
		if !ok || err != nil {
			return nil, errorf(path, "%s takes a duration such as \"30d\", \"12h\" or \"90m\"", op)
		}
		return []any{d}, nil
	case "before", "after":
		if f.Kind == KindDate {
			return one(scalar(f, raw, path))
		}
		s, ok := raw.(string)
		t, err := time.Parse(time.RFC3339Nano, s)
		if !ok || err != nil {
			return nil, errorf(path, "%s takes an RFC 3339 timestamp, e.g. 2026-12-01T00:00:00Z", op)
		}
		return []any{t.UTC()}, nil
	}
	return one(scalar(f, raw, path))
}

func one(v any, err error) ([]any, error) {
	if err != nil {
		return nil, err
	}
	return []any{v}, nil
}

// dateValue is a date attribute's value.
var dateValue = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// scalar is one value of f's kind.
func scalar(f Field, v any, path string) (any, error) {
	switch f.Kind {
	case KindString:
		s, ok := v.(string)
		if !ok {
			return nil, errorf(path, "%s takes a string", f.Name)
		}
		if len(s) > MaxValueBytes {
			return nil, errorf(path, "%d bytes; at most %d", len(s), MaxValueBytes)
		}
		return s, nil
	case KindInt:
		n, ok := v.(json.Number)
		i, err := strconv.ParseInt(string(n), 10, 64)
		if !ok || err != nil {
			return nil, errorf(path, "%s takes a whole number", f.Name)
		}
		return i, nil
	case KindBool:
		b, ok := v.(bool)
		if !ok {
			return nil, errorf(path, "%s takes true or false", f.Name)
		}
		return b, nil
	case KindDate:
		s, ok := v.(string)
		t, err := time.Parse(time.DateOnly, s)
		if !ok || !dateValue.MatchString(s) || err != nil {
			return nil, errorf(path, "%s takes a date, YYYY-MM-DD", f.Name)
		}
		return t, nil
	case KindVersion:
		s, ok := v.(string)
		key, err := VersionKey(s)
		if !ok || err != nil {
			return nil, errorf(path, "%s takes a version of up to four dotted numbers, e.g. \"5.10.0\"", f.Name)
		}
		return key, nil
	}
	return nil, errorf(path, "%s cannot be compared to a value (a %s)", f.Name, f.Kind)
}

// ParseDuration reads "30d", "2w", "12h", "90m", "45s" or a Go duration,
// positive and at most 10 years.
func ParseDuration(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if n, unit := strings.TrimRight(s, "dw"), strings.TrimLeft(s, "0123456789"); (unit == "d" || unit == "w") && n != "" {
		var v int64
		if v, err = strconv.ParseInt(n, 10, 64); err == nil && v <= 3660 {
			d = time.Duration(v) * 24 * time.Hour
			if unit == "w" {
				d *= 7
			}
		} else if err == nil {
			err = fmt.Errorf("%q is too long", s)
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err == nil && (d <= 0 || d > 3660*24*time.Hour) {
		err = fmt.Errorf("%q is not between a second and ten years", s)
	}
	return d, err
}

// VersionKey is a version's comparable key: up to four dotted numbers,
// each written in 6 digits ("5.10.0" → "000005.000010.000000.000000"), so
// that the keys sort as the versions do. The SQL of a version column makes
// the same key (versionKeySQL).
func VersionKey(v string) (string, error) {
	parts := strings.Split(strings.TrimSpace(v), ".")
	if len(parts) == 0 || len(parts) > 4 || v == "" {
		return "", fmt.Errorf("%q is not a version", v)
	}
	var b strings.Builder
	for i := range 4 {
		n := int64(0)
		if i < len(parts) {
			var err error
			if n, err = strconv.ParseInt(parts[i], 10, 64); err != nil || n < 0 || n > 999999 || parts[i] == "" {
				return "", fmt.Errorf("%q is not a version", v)
			}
		}
		if i > 0 {
			b.WriteByte('.')
		}
		fmt.Fprintf(&b, "%06d", n)
	}
	return b.String(), nil
}

// clip shortens request text quoted back in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
