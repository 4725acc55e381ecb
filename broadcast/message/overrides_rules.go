package message

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The building blocks of the platform override rules (overrides.go). A
// rule checks one JSON value (as encoding/json decodes into any) at a
// path, and returns it normalized to what the firebase SDK sends for it,
// or nil to leave it out: the SDK omits empty strings, false and empty
// maps, so a normalized object is byte for byte what FCM receives.

// rule checks and normalizes the value at p.
type rule func(w *walker, p path, v any) (any, error)

// path names a value inside an override object: its display name
// ("apns.headers.apns-priority") and the keys (string) and indexes (int)
// that reach it from the object's root.
type path struct {
	name string
	keys []any
}

func (p path) key(k string) path {
	return path{name: p.name + "." + k, keys: append(slices.Clip(p.keys), k)}
}

func (p path) index(i int) path {
	return path{name: p.name + "[" + strconv.Itoa(i) + "]", keys: append(slices.Clip(p.keys), i)}
}

// leaf is a string value that may be a template, rendered per target.
type leaf struct {
	path path
	src  string
	link *linkRule // non-nil: the rendered value must still be such a URL
	// origin is a templated URL's scheme and host, which the rendered
	// value must keep (overrides_link.go); nil for a static value.
	origin *origin
}

// walker carries what the rules collect: the string values that may be
// templates, in walk order.
type walker struct {
	leaves []leaf
}

func typeError(p path, want string, v any) error {
	return FieldErrorf("invalid_type", p.name, "%s must be %s, got %s", p.name, want, jsonKind(v))
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// text is a free string; it may be a template.
func text() rule {
	return func(w *walker, p path, v any) (any, error) {
		s, ok := v.(string)
		if !ok {
			return nil, typeError(p, "a string", v)
		}
		if !utf8.ValidString(s) {
			return nil, FieldErrorf("invalid_value", p.name, "%s is not valid UTF-8", p.name)
		}
		if s == "" {
			return nil, nil
		}
		w.leaves = append(w.leaves, leaf{path: p, src: s})
		return s, nil
	}
}

// linkRule is a URL field: https only, or http and https (images).
type linkRule struct{ httpOK bool }

func (l *linkRule) check(p path, s string) error {
	u, err := url.Parse(s)
	if err == nil && (u.Scheme == "https" || (l.httpOK && u.Scheme == "http")) && u.Host != "" {
		return nil
	}
	if l.httpOK {
		return FieldErrorf("invalid_value", p.name, "%s must be an http(s) URL, got %q", p.name, s)
	}
	return FieldErrorf("invalid_value", p.name, "%s must be an https URL, got %q", p.name, s)
}

// link is a URL. A templated one must fix its scheme and host before the
// first action ("https://example.com/u/{{.id}}"); the rendered value is
// checked again per target, and must keep that scheme and host.
func link(httpOK bool) rule {
	l := &linkRule{httpOK: httpOK}
	return func(w *walker, p path, v any) (any, error) {
		s, ok := v.(string)
		if !ok {
			return nil, typeError(p, "a string", v)
		}
		if s == "" {
			return nil, nil
		}
		static, _, templated := strings.Cut(s, "{{")
		if err := l.check(p, static); err != nil {
			if templated {
				return nil, FieldErrorf("invalid_value", p.name, "%s: a templated URL must start with its scheme and host, as in https://example.com/{{.id}}, got %q", p.name, s)
			}
			return nil, err
		}
		lf := leaf{path: p, src: s, link: l}
		if templated {
			lf.origin = templateOrigin(s, static)
		}
		w.leaves = append(w.leaves, lf)
		return s, nil
	}
}

// enum is one of values, matched without regard to case and sent as
// written in values.
func enum(values ...string) rule {
	return func(_ *walker, p path, v any) (any, error) {
		s, ok := v.(string)
		if !ok {
			return nil, typeError(p, "a string", v)
		}
		if s == "" {
			return nil, nil
		}
		for _, c := range values {
			if strings.EqualFold(s, c) {
				return c, nil
			}
		}
		return nil, FieldErrorf("invalid_value", p.name, "%s must be one of %s, got %q", p.name, strings.Join(values, ", "), s)
	}
}

// durationPattern is protobuf's JSON duration: seconds with up to nine
// fractional digits and the "s" suffix.
var durationPattern = regexp.MustCompile(`^([0-9]{1,12})(?:\.([0-9]{1,9}))?s$`)

// duration is a protobuf duration between 0 and max, normalized to the
// SDK's own spelling ("600s", "1.500000000s"): the SDK reads a shorter
// fraction as nanoseconds ("1.5s" would become 1.000000005s). ms refuses
// precision below a millisecond, which the SDK's field cannot carry.
func duration(max time.Duration, ms bool) rule {
	return func(_ *walker, p path, v any) (any, error) {
		s, ok := v.(string)
		if !ok {
			return nil, typeError(p, `a duration string such as "600s"`, v)
		}
		d, err := parseProtoDuration(s)
		if err != nil || d > max {
			return nil, FieldErrorf("invalid_value", p.name, "%s must be a duration in seconds such as \"600s\" or \"0.5s\", between 0s and %ds, got %q", p.name, int64(max/time.Second), s)
		}
		if ms && d%time.Millisecond != 0 {
			return nil, FieldErrorf("invalid_value", p.name, "%s must be a whole number of milliseconds, got %q", p.name, s)
		}
		return protoDuration(d), nil
	}
}

func parseProtoDuration(s string) (time.Duration, error) {
	m := durationPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("not a duration: %q", s)
	}
	sec, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || sec > math.MaxInt64/int64(time.Second)-1 {
		return 0, fmt.Errorf("duration %q out of range", s)
	}
	d := time.Duration(sec) * time.Second
	if m[2] != "" {
		frac := m[2] + strings.Repeat("0", 9-len(m[2]))
		n, _ := strconv.ParseInt(frac, 10, 64) // nine digits always parse
		d += time.Duration(n)
	}
	return d, nil
}

// protoDuration spells d as the SDK does (its durationToString).
func protoDuration(d time.Duration) string {
	sec, nanos := int64(d/time.Second), int64(d%time.Second)
	if nanos > 0 {
		return fmt.Sprintf("%d.%09ds", sec, nanos)
	}
	return fmt.Sprintf("%ds", sec)
}

var colorPattern = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// color is "#rrggbb".
func color() rule {
	return func(_ *walker, p path, v any) (any, error) {
		s, ok := v.(string)
		if !ok {
			return nil, typeError(p, `a color string such as "#ff8800"`, v)
		}
		if s == "" {
			return nil, nil
		}
		if !colorPattern.MatchString(s) {
			return nil, FieldErrorf("invalid_value", p.name, "%s must be a color in the #rrggbb form, got %q", p.name, s)
		}
		return s, nil
	}
}

// boolean is true or false; false is left out, as the SDK does.
func boolean() rule {
	return func(_ *walker, p path, v any) (any, error) {
		b, ok := v.(bool)
		if !ok {
			return nil, typeError(p, "true or false", v)
		}
		if !b {
			return nil, nil
		}
		return true, nil
	}
}

// integer is a whole number in [min, max].
func integer(min, max int64) rule {
	return func(_ *walker, p path, v any) (any, error) {
		f, ok := v.(float64)
		if !ok {
			return nil, typeError(p, "a whole number", v)
		}
		if f != math.Trunc(f) || f < float64(min) || f > float64(max) {
			return nil, FieldErrorf("invalid_value", p.name, "%s must be a whole number between %d and %d, got %v", p.name, min, max, f)
		}
		return f, nil
	}
}

// flag is Apple's 0-or-1 integer flag (content-available); 0 is left out.
func flag() rule {
	return func(_ *walker, p path, v any) (any, error) {
		f, ok := v.(float64)
		if !ok || (f != 0 && f != 1) {
			return nil, FieldErrorf("invalid_value", p.name, "%s must be 0 or 1, got %v", p.name, v)
		}
		if f == 0 {
			return nil, nil
		}
		return f, nil
	}
}

// number is a number in [min, max].
func number(min, max float64) rule {
	return func(_ *walker, p path, v any) (any, error) {
		f, ok := v.(float64)
		if !ok {
			return nil, typeError(p, "a number", v)
		}
		if f < min || f > max {
			return nil, FieldErrorf("invalid_value", p.name, "%s must be between %v and %v, got %v", p.name, min, max, f)
		}
		return f, nil
	}
}

// nonZero leaves a number out when it is 0 (a float field the SDK omits).
func nonZero(r rule) rule {
	return func(w *walker, p path, v any) (any, error) {
		out, err := r(w, p, v)
		if f, ok := out.(float64); ok && f == 0 {
			return nil, err
		}
		return out, err
	}
}

// list applies each to every element; an empty list is left out.
func list(each rule) rule {
	return func(w *walker, p path, v any) (any, error) {
		a, ok := v.([]any)
		if !ok {
			return nil, typeError(p, "an array", v)
		}
		out := make([]any, 0, len(a))
		for i, e := range a {
			n, err := each(w, p.index(i), e)
			if err != nil {
				return nil, err
			}
			if n == nil {
				n = zeroOf(e) // keep the positions: an element is never left out
			}
			out = append(out, n)
		}
		if len(out) == 0 {
			return nil, nil
		}
		return out, nil
	}
}

// zeroOf is the value a list keeps for an element its rule left out.
func zeroOf(v any) any {
	switch v.(type) {
	case bool:
		return false
	case float64:
		return 0.0
	case map[string]any:
		return map[string]any{}
	}
	return ""
}

// dataMap is a string-to-string map (FCM data); keys FCM reserves are
// refused; values may be templates. An empty map is left out.
func dataMap() rule {
	return func(w *walker, p path, v any) (any, error) {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, typeError(p, "an object of string values", v)
		}
		out := make(map[string]any, len(m))
		for _, k := range sortedKeys(m) {
			if err := CheckDataKey(k); err != nil {
				var fe *FieldError
				if errors.As(err, &fe) {
					return nil, FieldErrorf(fe.Code, p.key(k).name, "%s", fe.Message)
				}
				return nil, err
			}
			kp := p.key(k)
			s, ok := m[k].(string)
			if !ok {
				return nil, typeError(kp, "a string (FCM data values are strings)", m[k])
			}
			if !utf8.ValidString(s) {
				return nil, FieldErrorf("invalid_value", kp.name, "%s is not valid UTF-8", kp.name)
			}
			out[k] = s
			if s != "" {
				w.leaves = append(w.leaves, leaf{path: kp, src: s})
			}
		}
		if len(out) == 0 {
			return nil, nil
		}
		return out, nil
	}
}

// fields is an object with the given members; any other key is refused.
// An empty object is kept: the SDK sends a present struct as {}.
func fields(members map[string]rule) rule {
	return func(w *walker, p path, v any) (any, error) {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, typeError(p, "an object", v)
		}
		out := make(map[string]any, len(m))
		for _, k := range sortedKeys(m) {
			r, ok := members[k]
			if !ok {
				return nil, unknownField(p.key(k), members)
			}
			if m[k] == nil {
				continue // null: absent, as proto3 JSON reads it
			}
			n, err := r(w, p.key(k), m[k])
			if err != nil {
				return nil, err
			}
			if n != nil {
				out[k] = n
			}
		}
		return out, nil
	}
}

func unknownField(p path, members map[string]rule) error {
	return FieldErrorf("unknown_field", p.name, "unknown field %q (known here: %s)", p.name, strings.Join(sortedKeys(members), ", "))
}

// freeJSON is any JSON value, kept as it is (APNs custom payload keys);
// its strings may be templates.
func freeJSON() rule {
	var walk func(w *walker, p path, v any) any
	walk = func(w *walker, p path, v any) any {
		switch x := v.(type) {
		case string:
			if x != "" {
				w.leaves = append(w.leaves, leaf{path: p, src: x})
			}
		case []any:
			for i, e := range x {
				walk(w, p.index(i), e)
			}
		case map[string]any:
			for _, k := range sortedKeys(x) {
				walk(w, p.key(k), x[k])
			}
		}
		return v
	}
	return func(w *walker, p path, v any) (any, error) {
		return walk(w, p, v), nil
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
