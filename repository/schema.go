package repository

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

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

	tID, tUser, tToken, tPlatform string      // t.<column>; tPlatform "" when unmapped
	tAppVersion                   string      // t.<column> of the app's version on the device; "" when unmapped
	attrs                         []attribute // schema.users.attributes (segmentfields.go)
	uID, uLocale, uTimezone       string      // u.<column>; "NULL" when unmapped
	valid, enabled                string      // conditions on t and on u
	// owned keeps the tokens of one app (ForApp): "t.app = 'name'"; ""
	// for every token (a mapping without tokens.app, or no app chosen).
	owned  string
	appCol string // t.<column> of the tokens' app; "" when unmapped
	// live is the audience rule before freshness: valid AND enabled (AND
	// owned). base is the audience rule: live, and fresh when
	// PUSHFAN_STALE_AFTER is set (WithStaleAfter).
	live, base string

	// lastSeen is the t.<column> a token's freshness is read from
	// (t.updated_at for the bundled table, a mapping's last_seen), ""
	// when a mapping names none. fresh is the condition that a token is
	// not stale, and staleValue the same as a 0/1 column (a NULL
	// last_seen is fresh: no timestamp is no evidence the phone is gone);
	// both "" while PUSHFAN_STALE_AFTER is off.
	lastSeen          string
	fresh, staleValue string
	// flagged is this schema with base = live: a send's page reads the
	// stale tokens too, flagged by staleValue, so that it counts what it
	// leaves out (AudiencePageStale). nil while the stale rule is off.
	flagged *Schema

	// consent is a category's rule (WithCategory), in live; open is the
	// same schema without it, whose plan pages read each target's consent.
	consent consentRule
	open    *Schema

	onDead     string   // with ? for each parameter; "" for the bundled
	onDeadArgs []string // "id", "token", "code", in placeholder order

	// An audience page's SQL around its FROM clause and its filter, built
	// once (build): the hot path only joins them.
	pageCols, pageRange, pageTail string
}

// build derives the audience rule and the statements' fixed parts from
// the names.
func (sc *Schema) build() *Schema {
	sc.live = sc.valid + " AND " + sc.enabled
	if sc.consent.cond != "" {
		sc.live += " AND " + sc.consent.cond
	}
	if sc.owned != "" {
		sc.live += " AND " + sc.owned
	}
	sc.base = sc.live
	sc.flagged = nil
	if sc.fresh != "" {
		sc.base += " AND " + sc.fresh
		f := *sc
		f.base, f.flagged = sc.live, nil
		f.pageCols = f.targetColumns() + ", " + sc.staleValue + " FROM "
		f.pageRange = " WHERE " + sc.tID + " > ? AND " + sc.tID + " <= ? AND "
		f.pageTail = " ORDER BY " + sc.tID + " LIMIT ?"
		sc.flagged = &f
	}
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
		appCol: "t.app", lastSeen: "t.updated_at", tAppVersion: "t.app_version",
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
	return c.build()
}

// WithStaleAfter returns the schema whose audience rule also leaves out
// the tokens not refreshed for d (PUSHFAN_STALE_AFTER); d = 0 returns sc
// as it is. A token is stale when its last_seen column is older than the
// database's clock less d: one clock for every replica, and the cutoff is
// a constant of each statement, so nothing is bound per page. A mapping
// without a last_seen column cannot tell a stale token: an error naming
// the key.
func (sc *Schema) WithStaleAfter(d time.Duration) (*Schema, error) {
	if d <= 0 {
		return sc, nil
	}
	if sc.lastSeen == "" {
		return nil, errors.New("schema.tokens.last_seen: required when PUSHFAN_STALE_AFTER is set " +
			"(the date/time column the app sets on every token refresh)")
	}
	c := *sc
	cutoff := "NOW(6) - INTERVAL " + strconv.FormatInt(int64(d/time.Second), 10) + " SECOND"
	if sc.mapped {
		c.fresh = "(" + sc.lastSeen + " >= " + cutoff + " OR " + sc.lastSeen + " IS NULL)"
		c.staleValue = "COALESCE(" + sc.lastSeen + " < " + cutoff + ", 0)"
	} else {
		// device_tokens.updated_at is NOT NULL.
		c.fresh = sc.lastSeen + " >= " + cutoff
		c.staleValue = "(" + sc.lastSeen + " < " + cutoff + ")"
	}
	return c.build(), nil
}

// StaleRule reports whether the audience rule leaves stale tokens out.
func (sc *Schema) StaleRule() bool { return sc.fresh != "" }

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
		return BundledSchema().withAttributes(def.UserAttributes())
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
	sc.lastSeen = column("tokens.last_seen", "t", t.LastSeen, false)
	sc.tAppVersion = column("tokens.app_version", "t", t.AppVersion, false)
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
	return sc.build().withAttributes(u.Attributes)
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
