package audience

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// dateLayout is the format of a date parameter.
const dateLayout = "2006-01-02"

// maxExactInt is the largest integer a float64 holds exactly (2^53): an int
// parameter decoded by encoding/json into a float64 beyond it may already
// have been rounded, so it is refused (decode with UseNumber for more).
const maxExactInt = 1 << 53

// ParamProblem is one thing wrong with one request parameter.
type ParamProblem struct {
	Param   string `json:"param"`
	Problem string `json:"problem"`
}

// ParamError lists every problem with the parameters given for an audience
// (missing, unknown, wrong type, bad date), sorted by parameter name. The
// HTTP layer answers it with a 400.
type ParamError struct {
	Audience string
	Problems []ParamProblem
}

func (e *ParamError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Param + ": " + p.Problem
	}
	return fmt.Sprintf("audience %q: invalid params: %s", e.Audience, strings.Join(parts, "; "))
}

// Params returns the names of the parameters with a problem, sorted, once
// each.
func (e *ParamError) Params() []string {
	var out []string
	for _, p := range e.Problems {
		if len(out) == 0 || out[len(out)-1] != p.Param {
			out = append(out, p.Param)
		}
	}
	return out
}

// Bound is an audience with typed values for all of its parameters, ready to
// page. Its values are never modified after Bind, so a Bound may be copied
// and used from many goroutines.
type Bound struct {
	a      *Audience
	values map[string]any // int64, string, bool, or string (date)
}

// Audience returns the audience b was bound from (nil for the zero Bound).
func (b Bound) Audience() *Audience { return b.a }

// Params returns a copy of the bound values: int64 for int, string for
// string and date, bool for bool.
func (b Bound) Params() map[string]any {
	m := maps.Clone(b.values)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

// Bind checks request parameters against the declared types and returns
// them bound. Values are what encoding/json decodes into an any: float64 (or
// json.Number with UseNumber) for numbers, string, bool; Go integers are
// accepted too. An int must be a whole number (3.0 is fine; 3.5, "3" and
// numbers beyond ±2^53 as float64 are not), a date a string YYYY-MM-DD naming
// a real day. Every missing, unknown or mistyped parameter is reported in one
// *ParamError.
func (a *Audience) Bind(params map[string]any) (Bound, error) {
	var problems []ParamProblem
	values := make(map[string]any, len(a.params))
	for _, name := range slices.Sorted(maps.Keys(a.params)) {
		raw, ok := params[name]
		if !ok {
			problems = append(problems, ParamProblem{name, fmt.Sprintf("missing (want %s)", a.params[name])})
			continue
		}
		v, err := convert(a.params[name], raw)
		if err != nil {
			problems = append(problems, ParamProblem{name, err.Error()})
			continue
		}
		values[name] = v
	}
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if _, ok := a.params[name]; !ok {
			problems = append(problems, ParamProblem{name, "unknown parameter for this audience"})
		}
	}
	if len(problems) > 0 {
		slices.SortStableFunc(problems, func(x, y ParamProblem) int { return strings.Compare(x.Param, y.Param) })
		return Bound{}, &ParamError{Audience: a.name, Problems: problems}
	}
	return Bound{a: a, values: values}, nil
}

// convert checks raw against typ and returns the value to bind.
func convert(typ string, raw any) (any, error) {
	switch typ {
	case TypeInt:
		return toInt(raw)
	case TypeString:
		if s, ok := raw.(string); ok {
			return s, nil
		}
	case TypeBool:
		if b, ok := raw.(bool); ok {
			return b, nil
		}
	case TypeDate:
		s, ok := raw.(string)
		if !ok {
			break
		}
		d, err := time.Parse(dateLayout, s)
		if err != nil || d.Format(dateLayout) != s {
			return nil, fmt.Errorf("want a date YYYY-MM-DD, got %q", s)
		}
		return s, nil
	default:
		return nil, fmt.Errorf("unknown type %q", typ) // Compile prevents it
	}
	return nil, fmt.Errorf("want %s, got %s", typ, describe(raw))
}

func toInt(raw any) (int64, error) {
	bad := fmt.Errorf("want int, got %s", describe(raw))
	switch v := raw.(type) {
	case float64:
		if v != math.Trunc(v) || math.IsInf(v, 0) || math.Abs(v) > maxExactInt {
			return 0, bad
		}
		return int64(v), nil
	case float32:
		return toInt(float64(v))
	case json.Number:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return 0, bad
		}
		return toInt(f)
	case int:
		return int64(v), nil
	case int8:
		return int64(v), nil
	case int16:
		return int64(v), nil
	case int32:
		return int64(v), nil
	case int64:
		return v, nil
	case uint:
		return toInt(uint64(v))
	case uint8:
		return int64(v), nil
	case uint16:
		return int64(v), nil
	case uint32:
		return int64(v), nil
	case uint64:
		if v > math.MaxInt64 {
			return 0, bad
		}
		return int64(v), nil
	}
	return 0, bad
}

// describe names the JSON type (and value, when short) of a decoded value
// for error messages.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		if len(v) > 40 {
			return "a string"
		}
		return fmt.Sprintf("string %q", v)
	case bool:
		return fmt.Sprintf("bool %t", v)
	case float64:
		return "number " + formatNumber(v)
	case float32:
		return "number " + formatNumber(float64(v))
	case json.Number:
		return "number " + string(v)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprintf("number %d", v)
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("a %T", v)
}

// ParamsJSON encodes the bound values as a JSON object (keys sorted), for
// storing with a broadcast; BindJSON reads it back.
func (b Bound) ParamsJSON() ([]byte, error) {
	if b.a == nil {
		return nil, errors.New("audience: ParamsJSON of an unbound audience")
	}
	if len(b.values) == 0 {
		return []byte("{}"), nil
	}
	out, err := json.Marshal(b.values)
	if err != nil {
		return nil, fmt.Errorf("audience %q: encode params: %w", b.a.name, err)
	}
	return out, nil
}

// BindJSON decodes a JSON object of parameters (numbers kept exact with
// UseNumber) and binds it like Bind. Empty input and null mean no parameters.
func (a *Audience) BindJSON(raw []byte) (Bound, error) {
	params := map[string]any{}
	if t := bytes.TrimSpace(raw); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.UseNumber()
		if err := dec.Decode(&params); err != nil {
			return Bound{}, fmt.Errorf("audience %q: params are not a JSON object: %w", a.name, err)
		}
		if dec.More() {
			return Bound{}, fmt.Errorf("audience %q: params: trailing data after the JSON object", a.name)
		}
	}
	return a.Bind(params)
}

// formatNumber prints a JSON number the way it was most likely written.
func formatNumber(v float64) string {
	if math.Abs(v) < 1e21 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
