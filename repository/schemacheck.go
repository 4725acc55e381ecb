package repository

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// Check tests the mapping against the database, as start-up and `pushfan
// config check` do: every table and column exists (information_schema),
// the id columns are integers, each condition runs on its own table, the
// audience query runs (all of them with LIMIT 0, so nothing is read), and
// on_dead prepares. Every problem names its key. The bundled schema is
// the migrations' and needs no check.
func (sc *Schema) Check(ctx context.Context, db *sqlx.DB) error {
	if !sc.mapped {
		return nil
	}
	var errs []error
	u, t := sc.def.Users, sc.def.Tokens
	ucols, err := tableColumns(ctx, db, u.Table)
	if err != nil {
		errs = append(errs, fmt.Errorf("schema.users.table: %w", err))
	}
	tcols, err := tableColumns(ctx, db, t.Table)
	if err != nil {
		errs = append(errs, fmt.Errorf("schema.tokens.table: %w", err))
	}
	column := func(key, table string, cols map[string]string, name string, integer bool) {
		if cols == nil || name == "" {
			return
		}
		typ, ok := cols[strings.ToLower(name)]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("schema.%s: column %s not found in %s", key, name, table))
		case integer && !integerTypes[strings.ToLower(typ)]:
			errs = append(errs, fmt.Errorf("schema.%s: column %s of %s is %s, not an integer", key, name, table, typ))
		}
	}
	column("users.id", u.Table, ucols, u.ID, true)
	column("users.locale", u.Table, ucols, u.Locale, false)
	column("users.timezone", u.Table, ucols, u.Timezone, false)
	column("tokens.id", t.Table, tcols, t.ID, true)
	column("tokens.user_id", t.Table, tcols, t.UserID, true)
	column("tokens.token", t.Table, tcols, t.Token, false)
	column("tokens.platform", t.Table, tcols, t.Platform, false)
	column("tokens.last_seen", t.Table, tcols, t.LastSeen, false)
	if typ, ok := tcols[strings.ToLower(t.LastSeen)]; ok && t.LastSeen != "" && !timeTypes[strings.ToLower(typ)] {
		// Compared with the database's clock less PUSHFAN_STALE_AFTER: a
		// number or a string there would compare, and mean nothing.
		errs = append(errs, fmt.Errorf("schema.tokens.last_seen: column %s of %s is %s, not a date/time (datetime, timestamp or date)", t.LastSeen, t.Table, typ))
	}
	if len(errs) > 0 {
		return errors.Join(errs...) // the queries below would only repeat these
	}
	probe := func(key, q string) {
		rows, err := db.QueryContext(ctx, q+" LIMIT 0")
		if err != nil {
			errs = append(errs, fmt.Errorf("schema.%s: %w", key, err))
			return
		}
		rows.Close()
	}
	probe("users.push_enabled", "SELECT 1 FROM "+sc.usersTable+" u WHERE "+sc.enabled)
	probe("tokens.valid", "SELECT 1 FROM "+sc.tokensTable+" t WHERE "+sc.valid)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Both conditions together, in the join every audience query uses: a
	// column name both tables have is ambiguous only here.
	probe("users.push_enabled and schema.tokens.valid (joined)", "SELECT "+sc.targetColumns()+", "+sc.uTimezone+", "+or(sc.tPlatform, "NULL")+", "+or(sc.staleValue, "0")+
		" FROM "+sc.from+" WHERE "+sc.base)
	stmt, err := db.PrepareContext(ctx, sc.onDead)
	if err != nil {
		errs = append(errs, fmt.Errorf("schema.tokens.on_dead: %w", err))
	} else {
		stmt.Close()
	}
	return errors.Join(errs...)
}

// timeTypes are information_schema's DATA_TYPEs a last_seen column may have.
var timeTypes = map[string]bool{"datetime": true, "timestamp": true, "date": true}

// integerTypes are information_schema's DATA_TYPEs of the integer columns.
var integerTypes = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "integer": true, "bigint": true}

// tableColumns returns the columns of name ("table" or "db.table", in the
// connection's database when bare) by lower-cased name, with their types;
// an error when the table does not exist.
func tableColumns(ctx context.Context, db *sqlx.DB, name string) (map[string]string, error) {
	schema, table, found := strings.Cut(name, ".")
	var dbName any = schema
	if !found {
		dbName, table = nil, schema
	}
	rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?`, dbName, table)
	if err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", name, err)
	}
	defer rows.Close()
	cols := map[string]string{}
	for rows.Next() {
		var col, typ string
		if err := rows.Scan(&col, &typ); err != nil {
			return nil, fmt.Errorf("reading the columns of %s: %w", name, err)
		}
		cols[strings.ToLower(col)] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", name, err)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("table %s not found (or not visible to pushfan's database user)", name)
	}
	return cols, nil
}
