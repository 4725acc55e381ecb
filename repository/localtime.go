package repository

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"pushfan/internal/sqldb"
	"pushfan/model"
)

// ZoneCount is how many targets of an audience have one value of the
// timezone column (Null: none).
type ZoneCount struct {
	Zone    string
	Null    bool
	Targets int64
}

// zoneCondition is the SQL condition selecting zone group z, with its
// arguments. Without a mapped timezone column every user has none, so the
// group with Null is everyone and any other group nobody.
func (sc *Schema) zoneCondition(z model.ZoneFilter) (string, []any) {
	var parts []string
	var args []any
	if len(z.Names) > 0 {
		parts = append(parts, sc.uTimezone+" IN ("+strings.TrimSuffix(strings.Repeat("?,", len(z.Names)), ",")+")")
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

// ZoneCounts groups a built-in audience's targets (token ids up to maxID,
// the plan's snapshot) by their users' timezone column: local-time
// delivery plans one set of chunks per due instant from it. One grouped
// scan; the groups are as many as the distinct zone names in use.
func (sc *Schema) ZoneCounts(ctx context.Context, q sqldb.Querier, a model.Audience, maxID uint64) ([]ZoneCount, error) {
	a.Zones = nil
	cond, args, empty, err := audienceFilter(sc, a)
	if err != nil {
		return nil, fmt.Errorf("zone counts: %w", err)
	}
	if empty {
		return nil, nil
	}
	query := "SELECT " + sc.uTimezone + " AS zone, COUNT(*) FROM " + sc.from + " WHERE " + sc.tID + " <= ? AND " + cond + " GROUP BY zone"
	rows, err := q.QueryContext(ctx, query, append([]any{maxID}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("zone counts: %w", err)
	}
	defer rows.Close()
	var out []ZoneCount
	for rows.Next() {
		var z sql.NullString
		var n int64
		if err := rows.Scan(&z, &n); err != nil {
			return nil, fmt.Errorf("zone counts: %w", err)
		}
		out = append(out, ZoneCount{Zone: z.String, Null: !z.Valid, Targets: n})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("zone counts: %w", err)
	}
	return out, nil
}
