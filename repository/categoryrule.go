package repository

import (
	"context"
	"fmt"
	"strings"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// A category's consent (docs/consent.md) is part of the audience rule of
// its broadcasts: the users who have not consented are no target, in
// every statement that reads the audience (counts, plan pages, send
// pages, target lists), as push_enabled is. The conditions are built once
// per broadcast from its stored rules (model.Category): the bundled
// table's by its primary key (user_id, category), one lookup per target;
// an app's own as the SQL condition its YAML gives on the users table u.
// The category name is written into the SQL as a literal: it is a
// config.CategoryName (lower-case letters, digits, _ and -), never
// request text.

// consentRule is what a category adds to a schema.
type consentRule struct {
	// cond is the day consent as a condition ("": none needed).
	cond string
	// state is 1 with day consent, plus 2 with night consent, as one
	// expression: what a plan reads of each target, to count the users
	// left out and to defer those without night consent.
	state string
}

// WithCategory returns the schema whose audience rule also keeps only the
// users who consented to cat (nil, or a category without consent: sc as
// it is, with a night rule's state still readable). Open gives it back
// without the consent condition, for a plan that counts those it leaves
// out.
func (sc *Schema) WithCategory(cat *model.Category) *Schema {
	if cat == nil || (cat.Consent == "" && cat.Night == nil) {
		return sc
	}
	c := *sc
	c.consent = consentOf(sc, cat)
	c.open = nil
	o := c
	o.consent.cond = ""
	c.open = o.build()
	return c.build()
}

// Open is the schema without its category's consent condition (sc when it
// has none): its PlanRows carry each target's consent instead.
func (sc *Schema) Open() *Schema {
	if sc.open == nil {
		return sc
	}
	return sc.open
}

// ConsentState reports whether the schema reads a category's consent at
// all (a consent condition, or a night rule's consent).
func (sc *Schema) ConsentState() bool { return sc.consent.state != "" }

// ConsentRule reports whether the schema's audience rule holds a
// category's consent (WithCategory).
func (sc *Schema) ConsentRule() bool { return sc.consent.cond != "" }

// consentOf builds cat's conditions over sc's users table.
func consentOf(sc *Schema, cat *model.Category) consentRule {
	// A scalar subquery, not EXISTS: MariaDB turns an EXISTS into a
	// semi-join it may run by materializing every consent of the category
	// for each page; a scalar one stays a lookup of the user's row by the
	// primary key (eq_ref), as EXPLAIN shows (categoryrule_test.go).
	table := func(what string) string {
		return "(SELECT " + what + " FROM user_consents c WHERE c.user_id = " + sc.uID +
			" AND c.category = '" + cat.Name + "')"
	}
	var r consentRule
	day, night := "", "0"
	switch cat.Consent {
	case "":
	case model.ConsentTable:
		day = table("c.granted") + " = 1"
	default:
		day = "(" + cat.Consent + ")"
	}
	if n := cat.Night; n != nil {
		switch n.Consent {
		case "":
		case model.ConsentTable:
			night = "IF(" + table("c.granted = 1 AND c.night = 1") + ", 2, 0)"
		default:
			night = "IF((" + n.Consent + "), 2, 0)"
		}
	}
	r.cond = day
	switch {
	case cat.Consent == model.ConsentTable && cat.Night != nil && cat.Night.Consent == model.ConsentTable:
		// One lookup of the user's row for both flags.
		r.state = "COALESCE(" + table("IF(c.granted = 1, 1 + 2 * c.night, 0)") + ", 0)"
	case day == "":
		r.state = "1 + " + night
	default:
		r.state = "IF(" + day + ", 1, 0) + " + night
	}
	return r
}

// ForCategory returns a Store whose audiences keep only the users who
// consented to cat (Schema.WithCategory): every read of a broadcast's
// audience goes through the Store of its app and its category.
func (s *Store) ForCategory(cat *model.Category) *Store {
	sc := s.schema.WithCategory(cat)
	if sc == s.schema {
		return s
	}
	c := *s
	c.schema = sc // the walk (appWalk) is the app's, and stays
	return &c
}

// Consent states a plan reads (PlanRow.Consent).
const (
	ConsentDay   = 1 // the user consented to the category
	ConsentNight = 2 // and to it inside its night window
)

// UserConsents reads the consent state (ConsentDay | ConsentNight) of
// users ids under the schema's category (one statement per MaxIDsPerRead
// ids): how a named audience's plan and sends hold its users to the
// category, as the built-in audiences' SQL does. Users absent from the
// users table are absent from the answer (no consent).
func (s *Store) UserConsents(ctx context.Context, ids []uint64) (map[uint64]uint8, error) {
	if s.schema.consent.state == "" {
		out := make(map[uint64]uint8, len(ids))
		for _, id := range ids {
			out[id] = ConsentDay | ConsentNight
		}
		return out, nil
	}
	return usersColumn[uint8](ctx, s, ids, s.schema.consent.state, "", "users' consents")
}

// CheckConsent runs cat's conditions once over the schema's users table
// (no row needs to match): an SQL consent that names a missing column, or
// the bundled table missing, fails at start-up with the key named, not
// in a broadcast's plan.
func (sc *Schema) CheckConsent(ctx context.Context, q sqldb.Querier, cat model.Category) error {
	c := sc.WithCategory(&cat)
	if c == sc {
		return nil
	}
	// An impossible WHERE reads no row; the names are resolved all the same.
	rows, err := q.QueryContext(ctx, "SELECT "+c.consent.state+" FROM "+sc.usersTable+" u WHERE "+
		strings.Join(append([]string{"1 = 0"}, nonEmpty(c.consent.cond)...), " AND ")+" LIMIT 1")
	if err == nil {
		err = rows.Close()
	}
	if err != nil {
		return fmt.Errorf("categories.%s: its consent condition fails on %s: %w", cat.Name, sc.usersName, err)
	}
	return nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
