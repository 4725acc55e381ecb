package repository

import (
	"strings"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// zoneCondition is the SQL condition selecting zone group z, with its
// arguments: how a local-time chunk planned before migration 00014 reads
// its users (later plans fix each chunk's targets instead). Without a
// mapped timezone column every user has none, so the group with Null is
// everyone and any other group nobody.
func (sc *Schema) zoneCondition(z model.ZoneFilter) (string, []any) {
	var parts []string
	var args []any
	if len(z.Names) > 0 {
		parts = append(parts, sc.uTimezone+" IN ("+sqldb.InList(len(z.Names))+")")
		for _, n := range z.Names {
			args = append(args, n)
		}
	}
	if z.Null {
		parts = append(parts, sc.uTimezone+" IS NULL")
	}
	if len(parts) == 0 {
		return "FALSE", nil
	}
	return "(" + strings.Join(parts, " OR ") + ")", args
}
