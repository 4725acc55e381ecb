package repository

import (
	"context"
	"fmt"
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

// UserZones reads the IANA zone names of users ids (one statement per
// MaxIDsPerRead ids), for the local days of a frequency cap: a user with
// none (or an unmapped timezone column) is absent from the answer.
func (s *Store) UserZones(ctx context.Context, ids []uint64) (map[uint64]string, error) {
	out := make(map[uint64]string, len(ids))
	if s.schema.uTimezone == "NULL" {
		return out, nil
	}
	for len(ids) > 0 {
		batch := ids[:min(len(ids), MaxIDsPerRead)]
		ids = ids[len(batch):]
		args := make([]any, len(batch))
		for i, id := range batch {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx, "SELECT "+s.schema.uID+", "+s.schema.uTimezone+" FROM "+s.schema.usersTable+
			" u WHERE "+s.schema.uID+" IN ("+sqldb.InList(len(batch))+") AND "+s.schema.uTimezone+" IS NOT NULL", args...)
		if err != nil {
			return nil, fmt.Errorf("users' zones: %w", err)
		}
		for rows.Next() {
			var id uint64
			var zone string
			if err := rows.Scan(&id, &zone); err != nil {
				rows.Close()
				return nil, fmt.Errorf("users' zones: %w", err)
			}
			out[id] = zone
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("users' zones: %w", err)
		}
	}
	return out, nil
}
