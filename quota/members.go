package quota

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"
)

// MemberState is one live member of the budget as the cluster sees it.
type MemberState struct {
	Instance string
	Sending  bool
	// Demand is the rate its paced broadcasts need (+Inf: all it gets; 0
	// while idle).
	Demand float64
	// Share is its part of the limit by the split every member computes
	// (max-min over the sending members' demands; an idle member has none).
	Share        float64
	HeartbeatAge time.Duration
	// Schema is the database schema its release was built for (0: a
	// release from before migration 00029, which does not write it).
	Schema int64
	Self   bool
}

// Budget is the project's limit, its live members and any 429 pause.
type Budget struct {
	Limit       float64
	Members     []MemberState
	PausedUntil *time.Time
}

// Members reads the budget's live members (for the console's cluster
// view): one query, on demand, not part of the heartbeat loop.
func (c *Coordinator) Members(ctx context.Context) (Budget, error) {
	out := Budget{Limit: c.opt.Limit}
	rows, err := c.db.QueryContext(ctx, `SELECT instance, sending, demand, TIMESTAMPDIFF(MICROSECOND, heartbeat_at, UTC_TIMESTAMP(6)), schema_version FROM budget_members
		WHERE project = ? AND heartbeat_at > UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND ORDER BY instance`,
		c.opt.Project, c.opt.Stale.Microseconds())
	if err != nil {
		return out, fmt.Errorf("reading budget members: %w", err)
	}
	defer rows.Close()
	var demands []float64
	var sending []int
	for rows.Next() {
		var m MemberState
		var d sql.NullFloat64
		var ageMicros int64
		if err := rows.Scan(&m.Instance, &m.Sending, &d, &ageMicros, &m.Schema); err != nil {
			return out, fmt.Errorf("reading budget members: %w", err)
		}
		m.HeartbeatAge = time.Duration(ageMicros) * time.Microsecond
		// An idle member stores no demand: it wants nothing now.
		switch {
		case d.Valid:
			m.Demand = d.Float64
		case m.Sending:
			m.Demand = math.Inf(1)
		}
		m.Self = m.Instance == c.opt.Instance
		if m.Sending {
			sending = append(sending, len(out.Members))
			demands = append(demands, demandOf(m.Demand))
		}
		out.Members = append(out.Members, m)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("reading budget members: %w", err)
	}
	for k, share := range split(c.opt.Limit, demands) {
		out.Members[sending[k]].Share = share
	}
	var until sql.NullTime
	err = c.db.QueryRowContext(ctx, `SELECT paused_until FROM budget_pauses WHERE project = ? AND paused_until > UTC_TIMESTAMP(6)`, c.opt.Project).Scan(&until)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return out, fmt.Errorf("reading the pause: %w", err)
	}
	if until.Valid {
		t := until.Time.UTC()
		out.PausedUntil = &t
	}
	return out, nil
}
