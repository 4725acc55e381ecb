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
	if s.schema.uTimezone == "NULL" {
		return map[uint64]string{}, nil
	}
	return usersColumn[string](ctx, s, ids, s.schema.uTimezone, s.schema.uTimezone+" IS NOT NULL", "users' zones")
}

// usersColumn reads expr (a column or an expression over the users table
// u) for the users ids that match cond, one statement per MaxIDsPerRead
// ids; users absent from the table, or not matching, are absent from the
// answer. what names the read in its errors.
func usersColumn[V any](ctx context.Context, s *Store, ids []uint64, expr, cond, what string) (map[uint64]V, error) {
	out := make(map[uint64]V, len(ids))
	sc := s.schema
	if cond != "" {
		cond = " AND " + cond
	}
	for len(ids) > 0 {
		batch := ids[:min(len(ids), MaxIDsPerRead)]
		ids = ids[len(batch):]
		args := make([]any, len(batch))
		for i, id := range batch {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx, "SELECT "+sc.uID+", "+expr+" FROM "+sc.usersTable+" u WHERE "+sc.uID+" IN ("+sqldb.InList(len(batch))+")"+cond, args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		for rows.Next() {
			var id uint64
			var v V
			if err := rows.Scan(&id, &v); err != nil {
				rows.Close()
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			out[id] = v
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	return out, nil
}
