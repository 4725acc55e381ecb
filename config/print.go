package config

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Setting is one environment variable of the effective configuration, ready
// to print as NAME=Value.
type Setting struct {
	Name string
	// Value is the effective value in the syntax the variable accepts, or a
	// mask when Secret. Empty means unset.
	Value string
	// Secret is true when Value was masked (tokens) or partly masked (the
	// password inside a DSN).
	Secret bool
}

// mask replaces a secret. It says nothing about the secret's length or
// content.
const mask = "****"

// Effective lists every variable pushfan reads from the environment (except
// PUSHFAN_CONFIG, which names the file rather than a setting), in the order
// of Variables, with its effective value and every secret masked: admin and
// internal tokens, and the password inside the MySQL DSN. File paths such as
// GOOGLE_APPLICATION_CREDENTIALS are shown; their contents are never read.
//
// The variable-to-field mapping is derived from the same table Load uses
// (variables), so a new variable is printed without touching this file.
func (c Config) Effective() []Setting {
	var probe Config
	vs := variables(&probe)
	cv := reflect.ValueOf(c)
	out := make([]Setting, 0, len(vs))
	for _, v := range vs {
		s := Setting{Name: v.name}
		path, ok := fieldOf(&probe, v)
		switch {
		case !ok:
			// A setter none of the probes could drive: refuse to guess, and
			// never risk printing a secret.
			s.Value, s.Secret = "(not shown)", true
		default:
			s.Value, s.Secret = render(v.name, cv.FieldByIndex(path))
		}
		out = append(out, s)
	}
	return out
}

// fieldOf finds the Config field a variable sets by running its setter on a
// zero Config with values every setter kind accepts (an integer, a float and
// a string take "1"; a boolean takes "true"; a duration takes "1s") and
// looking for the field that changed.
func fieldOf(probe *Config, v variable) ([]int, bool) {
	for _, in := range []string{"1", "1s", "true", "probe"} {
		*probe = Config{}
		if v.set(in) != nil {
			continue
		}
		if path, ok := changedField(reflect.ValueOf(*probe), nil); ok {
			return path, true
		}
	}
	return nil, false
}

// changedField returns the index path of the first non-zero leaf field of v,
// descending into nested structs whose fields are all exported (Engine, HTTP,
// DB, Log).
func changedField(v reflect.Value, path []int) ([]int, bool) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		p := append(slices.Clone(path), i)
		if f.Kind() == reflect.Struct && allExported(f.Type()) {
			if q, ok := changedField(f, p); ok {
				return q, true
			}
			continue
		}
		if !f.IsZero() {
			return p, true
		}
	}
	return nil, false
}

func allExported(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		if !t.Field(i).IsExported() {
			return false
		}
	}
	return true
}

// secretName reports the variables whose text values are credentials.
// Numbers, booleans and durations are never secret, so a variable such as a
// per-token rate limit is still shown.
func secretName(name string) bool {
	for _, w := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// render formats a field in the syntax its variable accepts, masking secrets.
func render(name string, f reflect.Value) (string, bool) {
	if f.Type() == reflect.TypeFor[time.Duration]() {
		return time.Duration(f.Int()).String(), false
	}
	switch f.Kind() {
	case reflect.Bool:
		return strconv.FormatBool(f.Bool()), false
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(f.Int(), 10), false
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(f.Uint(), 10), false
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(f.Float(), 'g', -1, 64), false
	case reflect.String:
		s := f.String()
		switch {
		case s == "":
			return "", false
		case secretName(name):
			return mask, true
		case strings.HasSuffix(name, "_DSN"):
			m := MaskDSN(s)
			return m, m != s
		}
		return s, false
	case reflect.Slice:
		if f.Len() == 0 {
			return "", false
		}
		parts := make([]string, f.Len())
		for i := range parts {
			e := f.Index(i)
			switch {
			case name == "PUSHFAN_ADMIN_TOKENS" && e.Kind() == reflect.String:
				parts[i] = maskAdminToken(e.String())
			case name == "PUSHFAN_EVENT_KEYS" && e.Kind() == reflect.String:
				kid, _, _ := strings.Cut(e.String(), ":")
				parts[i] = kid + ":" + mask
			case secretName(name):
				parts[i] = mask
			case e.Kind() == reflect.String:
				parts[i] = e.String()
			default:
				// Not a shape any variable has today; do not guess a syntax.
				return "(not shown)", true
			}
		}
		return strings.Join(parts, ","), secretName(name) || name == "PUSHFAN_EVENT_KEYS"
	}
	if f.IsZero() {
		return "", false
	}
	return "(not shown)", true
}

// maskAdminToken masks one PUSHFAN_ADMIN_TOKENS entry, keeping the name and
// role of a name:role:secret entry (they are not secret, and they are what an
// operator checks) and masking the secret, clear or sha256:.
func maskAdminToken(entry string) string {
	if parts := strings.SplitN(entry, ":", 3); len(parts) == 3 && isRole(parts[1]) {
		return parts[0] + ":" + parts[1] + ":" + mask
	}
	return mask
}

// MaskDSN replaces the password of a go-sql-driver DSN
// ([user[:password]@][net[(addr)]]/dbname[?params]) with a mask, keeping the
// rest byte for byte. It finds the password as the driver does: between the
// first ':' and the last '@' before the last '/'. A DSN with no '/' (which
// the driver refuses) is masked the same way over the whole string, so an
// invalid DSN cannot leak its password either.
func MaskDSN(dsn string) string {
	head := dsn
	if i := strings.LastIndexByte(dsn, '/'); i >= 0 {
		head = dsn[:i]
	}
	at := strings.LastIndexByte(head, '@')
	if at < 0 {
		return dsn
	}
	colon := strings.IndexByte(head[:at], ':')
	if colon < 0 || colon+1 == at { // no password, or an empty one
		return dsn
	}
	return dsn[:colon+1] + mask + dsn[at:]
}
