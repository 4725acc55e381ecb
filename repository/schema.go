package repository

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"pushfan/model"
)

// Schema is the SQL of the built-in audiences over one mapping of the
// users and tokens tables, built once at start-up (CompileSchema) so that
// no query assembles identifiers per page. The bundled tables are one
// mapping among others (BundledSchema), and their SQL is exactly what it
// was before mappings existed.
//
// Aliases are fixed: the tokens table is t and the users table u, so an
// operator's condition may qualify a column (u.push_agree) when both
// tables have it.
type Schema struct {
	mapped bool
	def    model.SchemaMapping

	tokensTable, usersTable string // quoted, `db`.`table` or bare for the bundled
	tokensName, usersName   string // as the operator wrote them, for messages
	from                    string // "<tokens> t JOIN <users> u ON u.id = t.user_id"

	tID, tUser, tToken, tPlatform string // t.<column>; tPlatform "" when unmapped
	uID, uLocale, uTimezone       string // u.<column>; "NULL" when unmapped
	valid, enabled                string // conditions on t and on u
	// owned keeps the tokens of one app (ForApp): "t.app = 'name'"; ""
	// for every token (a mapping without tokens.app, or no app chosen).
	owned  string
	appCol string // t.<column> of the tokens' app; "" when unmapped
	base   string // the audience rule: valid AND enabled

	onDead     string   // with ? for each parameter; "" for the bundled
	onDeadArgs []string // "id", "token", "code", in placeholder order

	// An audience page's SQL around its FROM clause and its filter, built
	// once (build): the hot path only joins them.
	pageCols, pageRange, pageTail string
}

// build derives the statements' fixed parts from the names.
func (sc *Schema) build() *Schema {
	sc.pageCols = sc.targetColumns() + " FROM "
	sc.pageRange = " WHERE " + sc.tID + " > ? AND " + sc.tID + " <= ? AND "
	sc.pageTail = " ORDER BY " + sc.tID + " LIMIT ?"
	return sc
}

// BundledSchema is pushfan's own users and device_tokens tables.
func BundledSchema() *Schema {
	return (&Schema{
		tokensTable: "device_tokens", usersTable: "users",
		tokensName: "device_tokens", usersName: "users",
		from: "device_tokens t JOIN users u ON u.id = t.user_id",
		tID:  "t.id", tUser: "t.user_id", tToken: "t.token", tPlatform: "t.platform",
		uID: "u.id", uLocale: "u.locale", uTimezone: "u.timezone",
		valid: "t.invalidated_at IS NULL", enabled: "u.push_enabled = 1",
		base:   "t.invalidated_at IS NULL AND u.push_enabled = 1",
		appCol: "t.app",
	}).build()
}

// ForApp returns the schema reading app's tokens only: those whose app
// column names it (device_tokens.app, or a mapping's tokens.app). A
// mapping without an app column is one app's tables whole: ForApp returns
// it as it is. app must be a valid app name (config.AppName): it is
// written into the SQL as a literal, so that no statement carries it as
// an argument.
func (sc *Schema) ForApp(app string) *Schema {
	if sc.appCol == "" || app == "" {
		return sc
	}
	c := *sc
	c.owned = sc.appCol + " = '" + app + "'"
	c.base = sc.valid + " AND " + sc.enabled + " AND " + c.owned
	return c.build()
}

// ownedAnd is cond and the app condition, if any.
func (sc *Schema) ownedAnd(cond string) string {
	if sc.owned == "" {
		return cond
	}
	return cond + " AND " + sc.owned
}

// Mapped reports whether the schema is an operator's mapping.
func (sc *Schema) Mapped() bool { return sc.mapped }

// identifier is what a mapped table or column name may be: no quoting is
// needed for these, and backticks around them make reserved words safe.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`)

// CompileSchema checks a mapping's shape (every required key, every name
// an identifier, on_dead's parameters) and builds its SQL. An absent
// mapping is the bundled tables. Every problem names its key.
func CompileSchema(def model.SchemaMapping) (*Schema, error) {
	if !def.Mapped() {
		return BundledSchema(), nil
	}
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("schema.%s: "+format, append([]any{key}, args...)...))
	}
	if def.Users == nil {
		bad("users", "required with schema.tokens (both tables are mapped, or neither)")
	}
	if def.Tokens == nil {
		bad("tokens", "required with schema.users (both tables are mapped, or neither)")
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	u, t := def.Users, def.Tokens
	sc := &Schema{mapped: true, def: def, usersName: u.Table, tokensName: t.Table}
	table := func(key, name string) string {
		if name == "" {
			bad(key, "required")
			return ""
		}
		parts := strings.Split(name, ".")
		if len(parts) > 2 {
			bad(key, "%q is not table or db.table", name)
			return ""
		}
		for _, p := range parts {
			if !identifier.MatchString(p) {
				bad(key, "%q is not a plain identifier", p)
				return ""
			}
		}
		return "`" + strings.Join(parts, "`.`") + "`"
	}
	column := func(key, alias, name string, required bool) string {
		switch {
		case name == "" && required:
			bad(key, "required")
			return ""
		case name == "":
			return ""
		case !identifier.MatchString(name):
			bad(key, "%q is not a plain column name", name)
			return ""
		}
		return alias + ".`" + name + "`"
	}
	condition := func(key, cond string) string {
		if strings.TrimSpace(cond) == "" {
			bad(key, "required (an SQL condition; write 1 for none)")
		}
		return "(" + cond + ")"
	}
	sc.usersTable = table("users.table", u.Table)
	sc.uID = column("users.id", "u", u.ID, true)
	sc.enabled = condition("users.push_enabled", u.PushEnabled)
	sc.uLocale = or(column("users.locale", "u", u.Locale, false), "NULL")
	sc.uTimezone = or(column("users.timezone", "u", u.Timezone, false), "NULL")
	sc.tokensTable = table("tokens.table", t.Table)
	sc.tID = column("tokens.id", "t", t.ID, true)
	sc.tUser = column("tokens.user_id", "t", t.UserID, true)
	sc.tToken = column("tokens.token", "t", t.Token, true)
	sc.tPlatform = column("tokens.platform", "t", t.Platform, false)
	sc.appCol = column("tokens.app", "t", t.App, false)
	sc.valid = condition("tokens.valid", t.Valid)
	if strings.TrimSpace(t.OnDead) == "" {
		// Without it, every later broadcast would send to the dead tokens
		// again: the very problem the mapping exists to solve.
		bad("tokens.on_dead", "required (the statement marking a dead token in %s, with :id, :token, :code)", t.Table)
	} else {
		q, names, err := namedParams(t.OnDead)
		if err != nil {
			bad("tokens.on_dead", "%v", err)
		}
		sc.onDead, sc.onDeadArgs = q, names
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sc.from = sc.tokensTable + " t JOIN " + sc.usersTable + " u ON " + sc.uID + " = " + sc.tUser
	sc.base = sc.valid + " AND " + sc.enabled
	return sc.build(), nil
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// namedParams rewrites on_dead's :id, :token and :code to positional ?
// and returns the names in order. Quoted strings and quoted identifiers
// are copied as they are, so a ':' inside them is no parameter. Comments
// are not recognised: a ':name' inside one counts as a parameter (and an
// unknown name is refused), so an on_dead statement carries none.
func namedParams(s string) (string, []string, error) {
	var b strings.Builder
	var names []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return "", nil, fmt.Errorf("unterminated %c quote at byte %d", c, i)
			}
			b.WriteString(s[i : j+1])
			i = j + 1
		case c == '?':
			return "", nil, fmt.Errorf("positional ? at byte %d: use :id, :token or :code", i)
		case c == ';':
			if strings.TrimSpace(s[i+1:]) != "" {
				return "", nil, errors.New("more than one statement")
			}
			i = len(s)
		case c == ':' && i+1 < len(s) && (s[i+1] == '_' || isLetter(s[i+1])):
			j := i + 1
			for j < len(s) && (s[j] == '_' || isLetter(s[j]) || (s[j] >= '0' && s[j] <= '9')) {
				j++
			}
			name := s[i+1 : j]
			switch name {
			case "id", "token", "code":
			default:
				return "", nil, fmt.Errorf("unknown parameter :%s (the parameters are :id, :token and :code)", name)
			}
			names = append(names, name)
			b.WriteByte('?')
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	if len(names) == 0 {
		return "", nil, errors.New("names no dead token: use :id or :token")
	}
	return b.String(), names, nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
