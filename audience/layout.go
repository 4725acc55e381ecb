package audience

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// layout says where the required columns and the variables are in a result.
type layout struct {
	cursor, userID, token int
	timezone              int // -1: the query returns none
	tokenID               int // -1: the query returns none (ColTokenID)
	vars                  []varCol
}

type varCol struct {
	name   string
	index  int
	dbType string // DatabaseTypeName, for formatting times
}

// newLayout locates the required columns in a result and checks the
// variables' names; the error lists every problem.
func newLayout(cols []*sql.ColumnType) (layout, error) {
	l := layout{cursor: -1, userID: -1, token: -1, timezone: -1, tokenID: -1}
	var errs []error
	seen := make(map[string]bool, len(cols))
	for i, c := range cols {
		name := c.Name()
		low := strings.ToLower(name)
		if seen[low] {
			errs = append(errs, fmt.Errorf("column %q appears twice", name))
			continue
		}
		seen[low] = true
		switch low {
		case ColCursor:
			l.cursor = i
			if !isIntegerType(c.DatabaseTypeName()) {
				errs = append(errs, fmt.Errorf("column cursor is %s, want an unsigned integer", c.DatabaseTypeName()))
			}
		case ColUserID:
			l.userID = i
			if !isIntegerType(c.DatabaseTypeName()) {
				errs = append(errs, fmt.Errorf("column user_id is %s, want an unsigned integer", c.DatabaseTypeName()))
			}
		case ColToken:
			l.token = i
		default:
			if !isIdent(name) {
				errs = append(errs, fmt.Errorf("column %q is not a usable template variable name: alias it (AS some_name)", name))
				continue
			}
			switch low {
			case ColTimezone:
				l.timezone = i
			case ColTokenID:
				l.tokenID = i
				if !isIntegerType(c.DatabaseTypeName()) {
					errs = append(errs, fmt.Errorf("column token_id is %s, want an unsigned integer (the app's token id, equal to cursor)", c.DatabaseTypeName()))
				}
			}
			l.vars = append(l.vars, varCol{name: name, index: i, dbType: c.DatabaseTypeName()})
		}
	}
	var missing []string
	if l.cursor < 0 {
		missing = append(missing, ColCursor)
	}
	if l.userID < 0 {
		missing = append(missing, ColUserID)
	}
	if l.token < 0 {
		missing = append(missing, ColToken)
	}
	if len(missing) > 0 {
		have := make([]string, len(cols))
		for i, c := range cols {
			have[i] = c.Name()
		}
		errs = append([]error{fmt.Errorf("sql returns no %s column (it returns: %s); alias them, e.g. t.id AS cursor",
			strings.Join(missing, ", "), strings.Join(have, ", "))}, errs...)
	}
	if len(errs) > 0 {
		return layout{}, errors.Join(errs...)
	}
	return l, nil
}

// isIntegerType reports whether a driver type name (go-sql-driver's
// DatabaseTypeName: "BIGINT", "UNSIGNED BIGINT", ...) is an integer type.
func isIntegerType(t string) bool {
	t = strings.TrimPrefix(t, "UNSIGNED ")
	switch t {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT":
		return true
	}
	return false
}
