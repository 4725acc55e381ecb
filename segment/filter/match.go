package filter

import (
	"cmp"
	"slices"
	"time"
)

// Row is one target's values by field name, as Go values of each field's
// kind (string, int64, bool, time.Time; a version as written); a field
// absent from it is NULL.
type Row map[string]any

// Match reports whether f holds for row at now: the meaning Compile's SQL
// has (a test's oracle for it).
func Match(f *Filter, row Row, now time.Time) bool {
	switch {
	case f.Not != nil:
		return !Match(f.Not, row, now)
	case f.Cond != nil:
		return holds(f.Cond, row, now)
	case f.And != nil:
		for _, c := range f.And {
			if !Match(c, row, now) {
				return false
			}
		}
		return true
	}
	for _, c := range f.Or {
		if Match(c, row, now) {
			return true
		}
	}
	return false
}

// holds is one condition: false on a NULL value, except for a negative
// op, which is its positive one's negation.
func holds(c *Condition, row Row, now time.Time) bool {
	if pos, ok := negative[c.Op]; ok {
		p := *c
		p.Op = pos
		return !holds(&p, row, now)
	}
	v, ok := row[c.Field.Name]
	if c.Op == "exists" {
		present := ok && v != nil && v != ""
		return present == c.Values[0].(bool)
	}
	if !ok || v == nil {
		return false
	}
	if c.Field.Kind == KindVersion {
		key, err := VersionKey(v.(string))
		if err != nil {
			return false
		}
		v = key
	}
	switch c.Op {
	case "in":
		return slices.ContainsFunc(c.Values, func(x any) bool { return compare(v, x) == 0 })
	case "within":
		return !v.(time.Time).Before(now.Add(-c.Values[0].(time.Duration)))
	case "eq":
		return compare(v, c.Values[0]) == 0
	case "gt", "after":
		return compare(v, c.Values[0]) > 0
	case "gte":
		return compare(v, c.Values[0]) >= 0
	case "lt", "before":
		return compare(v, c.Values[0]) < 0
	case "lte":
		return compare(v, c.Values[0]) <= 0
	}
	return false
}

// compare orders two values of one kind.
func compare(a, b any) int {
	switch x := a.(type) {
	case string:
		return cmp.Compare(x, b.(string))
	case int64:
		return cmp.Compare(x, b.(int64))
	case bool:
		return cmp.Compare(boolInt(x), boolInt(b.(bool)))
	case time.Time:
		return x.Compare(b.(time.Time))
	}
	return 0
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
