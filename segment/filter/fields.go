package filter

import (
	"maps"
	"slices"
)

// Kind is the type of a field's values.
type Kind string

// The kinds of field.
const (
	KindString  Kind = "string"
	KindInt     Kind = "int"
	KindBool    Kind = "bool"
	KindDate    Kind = "date"    // a calendar date, "2026-12-05"
	KindTime    Kind = "time"    // an instant (last_seen)
	KindVersion Kind = "version" // dotted numbers compared as versions: 5.10.0 > 5.9.2
)

// Field is one field a filter may name, and the SQL that reads it: Expr
// over the tokens table t and the users table u (a quoted column of the
// schema mapping, never request text). Version fields compare by Key, an
// expression of Expr that sorts as versions do.
type Field struct {
	Name string
	Kind Kind
	Expr string
}

// The built-in fields; attributes are AttributePrefix + their name.
const (
	FieldPlatform   = "platform"
	FieldLocale     = "locale"
	FieldTimezone   = "timezone"
	FieldApp        = "app"
	FieldLastSeen   = "last_seen"
	FieldAppVersion = "app_version"
	FieldUserID     = "user_id"

	AttributePrefix = "attributes."
)

// Fields are the fields of one deployment's schema, by name.
type Fields map[string]Field

// Names lists the fields, sorted (for an error that says what exists).
func (f Fields) Names() []string { return slices.Sorted(maps.Keys(f)) }

// ops are the operators each kind takes.
var ops = map[Kind][]string{
	KindString:  {"eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "exists"},
	KindInt:     {"eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "exists"},
	KindVersion: {"eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "exists"},
	KindBool:    {"eq", "ne", "exists"},
	KindDate:    {"eq", "ne", "gt", "gte", "lt", "lte", "before", "after", "within", "not_within", "exists"},
	KindTime:    {"before", "after", "within", "not_within", "exists"},
}

// Ops lists the operators a kind takes.
func Ops(k Kind) []string { return slices.Clone(ops[k]) }
