package filter

import (
	"strconv"
	"strings"
	"time"
)

// Compile is f as one SQL condition over the tokens table t and the users
// table u, with its values as bound parameters in args: nothing of the
// request is written into the SQL but the placeholders. "not" is pushed
// down to the conditions (each negated condition also holds where the
// value is NULL, as its Go meaning says), so that the positive conditions
// stay plain comparisons an index can serve.
func Compile(f *Filter) (cond string, args []any) {
	var b strings.Builder
	compile(&b, &args, f, false)
	return b.String(), args
}

func compile(b *strings.Builder, args *[]any, f *Filter, neg bool) {
	switch {
	case f.Not != nil:
		compile(b, args, f.Not, !neg)
	case f.Cond != nil:
		leaf(b, args, f.Cond, neg)
	default:
		list, join := f.And, " AND "
		if f.Or != nil {
			list, join = f.Or, " OR "
		}
		if neg { // De Morgan
			if join == " AND " {
				join = " OR "
			} else {
				join = " AND "
			}
		}
		b.WriteByte('(')
		for i, c := range list {
			if i > 0 {
				b.WriteString(join)
			}
			compile(b, args, c, neg)
		}
		b.WriteByte(')')
	}
}

// negative ops are the negations of another op.
var negative = map[string]string{"ne": "eq", "nin": "in", "not_within": "within"}

// leaf writes condition c, negated with neg.
func leaf(b *strings.Builder, args *[]any, c *Condition, neg bool) {
	op := c.Op
	if pos, ok := negative[op]; ok {
		op, neg = pos, !neg
	}
	col := c.Field.Expr
	if op == "exists" {
		// Presence is never NULL: its negation is the other presence,
		// with no "IS NULL OR" (a NULL is absent, not unknown).
		present := col + " IS NOT NULL"
		if c.Field.Kind == KindString || c.Field.Kind == KindVersion {
			present += " AND " + col + " <> ''"
		}
		if c.Values[0].(bool) != neg {
			b.WriteString("(" + present + ")")
		} else {
			b.WriteString("(NOT (" + present + "))")
		}
		return
	}
	if neg {
		b.WriteString("(" + col + " IS NULL OR NOT ")
	}
	b.WriteByte('(')
	val := col
	if c.Field.Kind == KindVersion {
		val = versionKeySQL(col)
	}
	switch op {
	case "in":
		b.WriteString(val + " IN (")
		for i, v := range c.Values {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('?')
			*args = append(*args, arg(c.Field.Kind, v))
		}
		b.WriteByte(')')
	case "within":
		b.WriteString(col + " >= NOW(6) - INTERVAL ? SECOND")
		*args = append(*args, int64(c.Values[0].(time.Duration)/time.Second))
	default:
		b.WriteString(val + " " + sqlOps[op] + " ?")
		*args = append(*args, arg(c.Field.Kind, c.Values[0]))
	}
	b.WriteByte(')')
	if neg {
		b.WriteByte(')')
	}
}

var sqlOps = map[string]string{"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<=", "before": "<", "after": ">"}

// arg is a value as a parameter: a date as its day, an instant in UTC.
func arg(k Kind, v any) any {
	if t, ok := v.(time.Time); ok {
		if k == KindDate {
			return t.Format(time.DateOnly)
		}
		return t.UTC()
	}
	return v
}

// versionKeySQL is VersionKey in SQL over the column expression col: each
// of its first four dotted parts as a 6-digit number (a part that is not
// a number reads 0), NULL for NULL.
func versionKeySQL(col string) string {
	padded := "CONCAT(" + col + ", '.0.0.0')"
	parts := make([]string, 4)
	for i := range parts {
		p := "SUBSTRING_INDEX(" + padded + ", '.', " + strconv.Itoa(i+1) + ")"
		if i > 0 {
			p = "SUBSTRING_INDEX(" + p + ", '.', -1)"
		}
		parts[i] = "LPAD(LEAST(CAST(" + p + " AS UNSIGNED), 999999), 6, '0')"
	}
	return "CONCAT(" + strings.Join(parts, ", '.', ") + ")"
}
