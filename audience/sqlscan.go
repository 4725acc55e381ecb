package audience

import (
	"errors"
	"fmt"
	"strings"
)

// scanned is the result of rewriting an audience query.
type scanned struct {
	// query is the SQL with every named placeholder replaced by "?" and a
	// trailing ";" dropped; everything else is copied byte for byte.
	query string
	// names holds the placeholder names in positional order: names[i] is
	// the parameter bound to the i-th "?". A name used twice appears twice.
	names []string
}

// scanSQL finds the named placeholders (":name", name = [A-Za-z_][A-Za-z0-9_]*)
// of a MySQL/MariaDB query and rewrites them to positional "?".
//
// It understands the lexical parts where a colon is not a placeholder:
// '...' and "..." strings (with backslash escapes and doubled quotes),
// `...` identifiers (with doubled backticks), "-- ", "#" and "/* */"
// comments, and "::". Values are never spliced into the text: the result
// only ever holds "?" where a placeholder was.
//
// It refuses a positional "?" outside strings and comments (its argument
// would be unnamed), unterminated strings, identifiers and comments, and a
// second statement after a ";".
func scanSQL(s string) (scanned, error) {
	var b strings.Builder
	b.Grow(len(s))
	var names []string
	n := len(s)
	for i := 0; i < n; {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j, ok := skipQuoted(s, i)
			if !ok {
				return scanned{}, fmt.Errorf("unterminated %c quote starting at byte %d", c, i)
			}
			b.WriteString(s[i:j])
			i = j
		case c == '#' || (c == '-' && i+2 <= n && s[i+1] == '-' && (i+2 == n || isSpaceOrCtl(s[i+2]))):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				j = n - i
			}
			b.WriteString(s[i : i+j])
			i += j
		case c == '/' && i+1 < n && s[i+1] == '*':
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return scanned{}, fmt.Errorf("unterminated /* comment starting at byte %d", i)
			}
			end := i + 2 + j + 2
			b.WriteString(s[i:end])
			i = end
		case c == ':' && i+1 < n && s[i+1] == ':':
			b.WriteString("::")
			i += 2
		case c == ':' && i+1 < n && isIdentStart(s[i+1]):
			j := i + 1
			for j < n && isIdentPart(s[j]) {
				j++
			}
			names = append(names, s[i+1:j])
			b.WriteByte('?')
			i = j
		case c == '?':
			return scanned{}, fmt.Errorf("positional ? placeholder at byte %d: use named :params", i)
		case c == ';':
			if !onlyBlankOrComments(s[i+1:]) {
				return scanned{}, errors.New("more than one statement (a ; followed by more SQL)")
			}
			i = n // drop the trailing ";" (and any comment after it)
		default:
			b.WriteByte(c)
			i++
		}
	}
	return scanned{query: strings.TrimRight(b.String(), " \t\r\n"), names: names}, nil
}

// skipQuoted returns the index just past the string or quoted identifier
// starting at s[i], and false when it is not terminated.
func skipQuoted(s string, i int) (int, bool) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '\\' && q != '`':
			j++ // the escaped byte, whatever it is
		case c == q:
			if j+1 < len(s) && s[j+1] == q {
				j++ // doubled quote: a literal quote
				continue
			}
			return j + 1, true
		}
	}
	return len(s), false
}

// onlyBlankOrComments reports whether s holds nothing but whitespace and
// comments.
func onlyBlankOrComments(s string) bool {
	rest := skipBlankAndComments(s)
	return rest == ""
}

// skipBlankAndComments drops leading whitespace and comments from s.
func skipBlankAndComments(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n\f\v")
		switch {
		case strings.HasPrefix(s, "#") || (strings.HasPrefix(s, "--") && (len(s) == 2 || isSpaceOrCtl(s[2]))):
			j := strings.IndexByte(s, '\n')
			if j < 0 {
				return ""
			}
			s = s[j+1:]
		case strings.HasPrefix(s, "/*"):
			j := strings.Index(s[2:], "*/")
			if j < 0 {
				return ""
			}
			s = s[2+j+2:]
		default:
			return s
		}
	}
}

// firstKeyword returns the first word of the statement, upper-cased,
// skipping whitespace, comments and opening parentheses.
func firstKeyword(s string) string {
	for {
		s = skipBlankAndComments(s)
		if !strings.HasPrefix(s, "(") {
			break
		}
		s = s[1:]
	}
	j := 0
	for j < len(s) && isIdentPart(s[j]) {
		j++
	}
	return strings.ToUpper(s[:j])
}

func isSpaceOrCtl(c byte) bool { return c <= ' ' }

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// isIdent reports whether s is a non-empty [A-Za-z_][A-Za-z0-9_]* word:
// usable as a parameter name and as a template field ({{.name}}).
func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentPart(s[i]) {
			return false
		}
	}
	return true
}
