package repository

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/jmoiron/sqlx"

	"pushfan/model"
	"pushfan/segment/filter"
)

// A segment's filter (package segment/filter) reads the columns the
// schema mapping names, never a name from the request: SegmentFields is
// the fields this schema has, each with its column. A mapping without a
// platform, locale, timezone, app, last_seen or app_version column has no
// such field (a filter naming it is a 400 listing the ones there are).

// attribute is one declared users' column (schema.users.attributes).
type attribute struct {
	name string
	kind filter.Kind
	expr string // u.`column`
}

// attributeName is what an attribute may be called: filter.AttributePrefix
// + it names the field.
var attributeName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// attributeKinds are the types an attribute may have.
var attributeKinds = map[string]filter.Kind{"string": filter.KindString, "int": filter.KindInt, "bool": filter.KindBool, "date": filter.KindDate}

// withAttributes checks the declared attributes and adds them to sc.
// Every problem names its key (schema.users.attributes.NAME.column).
func (sc *Schema) withAttributes(attrs map[string]model.Attribute) (*Schema, error) {
	if len(attrs) == 0 {
		return sc, nil
	}
	var errs []error
	var out []attribute
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		a := attrs[name]
		key := "schema.users.attributes." + name
		kind, ok := attributeKinds[a.Type]
		switch {
		case !attributeName.MatchString(name):
			errs = append(errs, fmt.Errorf("schema.users.attributes: %q must be 1 to 32 lower-case letters, digits or _, starting with a letter", name))
			continue
		case !identifier.MatchString(a.Column):
			errs = append(errs, fmt.Errorf("%s.column: %q is not a plain column name", key, a.Column))
			continue
		case !ok:
			errs = append(errs, fmt.Errorf("%s.type: %q is not string, int, bool or date", key, a.Type))
			continue
		}
		out = append(out, attribute{name: name, kind: kind, expr: "u.`" + a.Column + "`"})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c := *sc
	c.attrs = out
	return &c, nil
}

// SegmentFields are the fields a segment's filter may name on this schema.
func (sc *Schema) SegmentFields() filter.Fields {
	f := filter.Fields{}
	add := func(name string, kind filter.Kind, expr string) {
		if expr != "" && expr != "NULL" {
			f[name] = filter.Field{Name: name, Kind: kind, Expr: expr}
		}
	}
	add(filter.FieldPlatform, filter.KindString, sc.tPlatform)
	add(filter.FieldLocale, filter.KindString, sc.uLocale)
	add(filter.FieldTimezone, filter.KindString, sc.uTimezone)
	add(filter.FieldApp, filter.KindString, sc.appCol)
	add(filter.FieldLastSeen, filter.KindTime, sc.lastSeen)
	add(filter.FieldAppVersion, filter.KindVersion, sc.tAppVersion)
	add(filter.FieldUserID, filter.KindInt, sc.tUser)
	for _, a := range sc.attrs {
		add(filter.AttributePrefix+a.name, a.kind, a.expr)
	}
	return f
}

// CheckSegmentFields reads every field's column once (LIMIT 0: nothing is
// read): a declared attribute whose column is missing stops start-up with
// its key named, before a segment could fail on it.
func (sc *Schema) CheckSegmentFields(ctx context.Context, db *sqlx.DB) error {
	var errs []error
	for _, a := range sc.attrs {
		rows, err := db.QueryContext(ctx, "SELECT "+a.expr+" FROM "+sc.usersTable+" u LIMIT 0")
		if err != nil {
			errs = append(errs, fmt.Errorf("schema.users.attributes.%s: %w", a.name, err))
			continue
		}
		rows.Close()
	}
	if sc.tAppVersion != "" && sc.mapped {
		rows, err := db.QueryContext(ctx, "SELECT "+sc.tAppVersion+" FROM "+sc.tokensTable+" t LIMIT 0")
		if err != nil {
			errs = append(errs, fmt.Errorf("schema.tokens.app_version: %w", err))
		} else {
			rows.Close()
		}
	}
	return errors.Join(errs...)
}

// segmentFilter is audienceFilter's condition for a segment: the audience
// rule and the segment's filter, compiled over this schema's columns with
// its values bound. A filter that names a field this schema lacks (a
// segment saved for another app's tables) is an error naming it.
func segmentFilter(sc *Schema, seg model.SegmentRef) (string, []any, bool, error) {
	f, err := filter.Parse(seg.Filter, sc.SegmentFields(), "segment "+seg.Name)
	if err != nil {
		return "", nil, false, fmt.Errorf("segment %q version %d: %w", seg.Name, seg.Version, err)
	}
	cond, args := filter.Compile(f)
	return sc.base + " AND " + cond, args, false, nil
}

// CheckSegment reports whether seg's filter reads on this schema (every
// field it names is one of SegmentFields): an error naming the field if
// not.
func (sc *Schema) CheckSegment(seg model.SegmentRef) error {
	_, _, _, err := segmentFilter(sc, seg)
	return err
}
