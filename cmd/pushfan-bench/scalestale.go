package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// staleFigures are what PUSHFAN_STALE_AFTER costs on the scale run's
// tokens, with one in four marked 40 days old: per setting ("off" and
// "30d"), the preview of "all", its plan, and a walk of every token by
// the send's own page statement (rows the server read, and time).
type staleFigures struct {
	MarkedStale   int64               `json:"tokens_marked_stale"`
	MarkSeconds   float64             `json:"mark_seconds"`
	BySetting     map[string]staleRun `json:"by_setting"`
	Explain       map[string]string   `json:"explain_page"`
	WalkPageSize  int                 `json:"walk_page_size"`
	RowsReadRatio float64             `json:"walk_rows_read_30d_over_off"`
}

// staleRun is one setting's figures.
type staleRun struct {
	PreviewMS     float64 `json:"preview_all_ms"`
	PreviewCount  int64   `json:"preview_count"`
	PreviewStale  int64   `json:"preview_stale"`
	PreviewError  string  `json:"preview_error,omitempty"`
	CountSeconds  float64 `json:"count_statement_s"`
	CountAll      int64   `json:"count_statement_rows"`
	CountStale    int64   `json:"count_statement_stale"`
	PlanSeconds   float64 `json:"plan_all_s"`
	Targeted      int64   `json:"planned_targeted"`
	WalkSeconds   float64 `json:"walk_s"`
	WalkTargets   int64   `json:"walk_targets"`
	WalkRowsRead  float64 `json:"walk_rows_read"`
	WalkStatement int64   `json:"walk_statements"`
}

// staleWalkPage is the engine's default page size (PUSHFAN_PAGE_SIZE).
const staleWalkPage = 1000

// staleCost measures the stale rule on db: it marks every 4th token 40
// days old, then, for the rule off and at 30 days, starts a serve,
// previews "all" (one counting scan), plans an "all" (then cancels it),
// and walks every token with the page statement a send runs
// (repository.AudiencePageStale for the default app of the bundled
// table), counting the rows the server read by the session's handler
// counters. The index question is answered by EXPLAIN: the walk is the
// primary key's range either way, and the rule only filters (or flags)
// the rows it reads.
func (m *scaleMeasure) staleCost(ctx context.Context) error {
	m.setPhase("stale tokens")
	defer m.setPhase("")
	f := &staleFigures{BySetting: map[string]staleRun{}, Explain: map[string]string{}, WalkPageSize: staleWalkPage}
	m.sr.Stale = f
	t0 := time.Now()
	res, err := m.db.ExecContext(ctx, "UPDATE device_tokens SET updated_at = NOW(6) - INTERVAL 40 DAY WHERE id % 4 = 0 AND updated_at > NOW(6) - INTERVAL 30 DAY")
	if err != nil {
		return fmt.Errorf("marking tokens stale: %w", err)
	}
	f.MarkedStale, _ = res.RowsAffected()
	f.MarkSeconds = time.Since(t0).Seconds()
	m.b.logf("  stale: marked %d tokens 40 days old in %.1f s", f.MarkedStale, f.MarkSeconds)
	for _, setting := range []string{"off", "30d"} {
		var env []string
		if setting != "off" {
			env = append(env, "PUSHFAN_STALE_AFTER="+setting)
		}
		svc, err := m.b.scaleService(ctx, m.emu, benchDB{dsn: m.svc.dsn()}, "serve-stale-"+setting, env...)
		if err != nil {
			return err
		}
		sm := &scaleMeasure{b: m.b, svc: svc, emu: m.emu, db: m.db, sr: m.sr}
		run, err := sm.staleRun(ctx, setting != "off", f)
		svc.stop()
		if err != nil {
			return fmt.Errorf("stale %s: %w", setting, err)
		}
		f.BySetting[setting] = run
		m.b.logf("  stale %s: preview %.0f ms (count %d, stale %d); its count statement %.1f s (%d, of them stale %d); plan of all %.1f s (%d targets); walk %.1f s, %.0f rows read for %d targets in %d statements",
			setting, run.PreviewMS, run.PreviewCount, run.PreviewStale, run.CountSeconds, run.CountAll, run.CountStale, run.PlanSeconds, run.Targeted,
			run.WalkSeconds, run.WalkRowsRead, run.WalkTargets, run.WalkStatement)
	}
	if off := f.BySetting["off"].WalkRowsRead; off > 0 {
		f.RowsReadRatio = f.BySetting["30d"].WalkRowsRead / off
	}
	return nil
}

// staleRun is one setting's preview, plan and walk.
func (m *scaleMeasure) staleRun(ctx context.Context, on bool, f *staleFigures) (staleRun, error) {
	var r staleRun
	var p struct {
		Count int64 `json:"count"`
		Stale int64 `json:"stale"`
	}
	t0 := time.Now()
	// The server gives a preview 6 × PUSHFAN_DB_TIMEOUT (60 s): on a
	// loaded machine a count of 10M may not make it, which is worth
	// recording, not a reason to stop the run.
	if err := m.svc.postJSONWithin(ctx, 2*time.Minute, "/push/preview", map[string]any{"audience": map[string]any{"all": true}}, &p); err != nil {
		r.PreviewError = err.Error()
		m.b.logf("  stale on=%v: preview: %v", on, err)
	} else {
		r.PreviewMS, r.PreviewCount, r.PreviewStale = ms(time.Since(t0)), p.Count, p.Stale
	}
	// The preview's counting statement (repository.CountAudienceStale,
	// or CountAudience with the rule off), timed on the bench's session.
	q := "SELECT COUNT(*), 0 FROM device_tokens t JOIN users u ON u.id = t.user_id WHERE t.invalidated_at IS NULL AND u.push_enabled = 1 AND t.app = 'default'"
	if on {
		q = "SELECT COUNT(*), SUM((t.updated_at < NOW(6) - INTERVAL 2592000 SECOND)) FROM device_tokens t JOIN users u ON u.id = t.user_id WHERE t.invalidated_at IS NULL AND u.push_enabled = 1 AND t.app = 'default'"
	}
	t0 = time.Now()
	var all, stale sql.NullInt64
	if err := m.db.QueryRowContext(ctx, q).Scan(&all, &stale); err != nil {
		return r, fmt.Errorf("count: %w", err)
	}
	r.CountSeconds, r.CountAll, r.CountStale = time.Since(t0).Seconds(), all.Int64, stale.Int64
	t0 = time.Now()
	v, _, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "stale", "audience": map[string]any{"all": true}})
	if err != nil {
		return r, err
	}
	pv, planned, err := m.waitPlanned(ctx, v.ID, t0)
	if err != nil {
		return r, err
	}
	r.PlanSeconds, r.Targeted = planned, pv.Targeted
	if !pv.Final() {
		if _, err := m.cancel(ctx, v.ID); err != nil {
			return r, err
		}
	}
	return r, m.staleWalk(ctx, on, &r, f)
}

// staleWalk pages every token of device_tokens as a send of the default
// app does, on one session, and reads that session's handler counters.
func (m *scaleMeasure) staleWalk(ctx context.Context, on bool, r *staleRun, f *staleFigures) error {
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	cols, name := "t.id, t.user_id, t.token, u.locale", "off"
	if on {
		cols, name = cols+", (t.updated_at < NOW(6) - INTERVAL 2592000 SECOND)", "30d"
	}
	q := "SELECT STRAIGHT_JOIN " + cols + " FROM device_tokens t IGNORE INDEX (idx_device_tokens_app) JOIN users u ON u.id = t.user_id" +
		" WHERE t.id > ? AND t.id <= ? AND t.invalidated_at IS NULL AND u.push_enabled = 1 AND t.app = 'default' ORDER BY t.id LIMIT ?"
	explain, err := explainRows(ctx, conn, "EXPLAIN "+q, 0, uint64(1)<<62, staleWalkPage)
	if err != nil {
		return err
	}
	f.Explain[name] = explain
	before, err := sessionReads(ctx, conn)
	if err != nil {
		return err
	}
	t0 := time.Now()
	var after uint64
	for {
		rows, err := conn.QueryContext(ctx, q, after, uint64(1)<<62, staleWalkPage)
		if err != nil {
			return err
		}
		r.WalkStatement++
		read, kept, last := 0, 0, after
		for rows.Next() {
			var id, uid uint64
			var tok string
			var loc sql.NullString
			var stale bool
			dst := []any{&id, &uid, &tok, &loc}
			if on {
				dst = append(dst, &stale)
			}
			if err := rows.Scan(dst...); err != nil {
				rows.Close()
				return err
			}
			read++
			last = id
			if !stale {
				kept++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		r.WalkTargets += int64(kept)
		if read < staleWalkPage {
			break
		}
		after = last
	}
	r.WalkSeconds = time.Since(t0).Seconds()
	afterReads, err := sessionReads(ctx, conn)
	if err != nil {
		return err
	}
	r.WalkRowsRead = afterReads - before
	return nil
}

// sessionReads is the session's rows read: its Handler_read_* counters.
func sessionReads(ctx context.Context, conn *sql.Conn) (float64, error) {
	rows, err := conn.QueryContext(ctx, "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_key', 'Handler_read_next', 'Handler_read_rnd_next', 'Handler_read_first')")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var sum float64
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return 0, err
		}
		var n float64
		fmt.Sscan(v, &n)
		sum += n
	}
	return sum, rows.Err()
}

// explainRows renders an EXPLAIN's rows as "table type key rows extra; ...".
func explainRows(ctx context.Context, conn *sql.Conn, q string, args ...any) (string, error) {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return "", fmt.Errorf("explain: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		var parts []string
		for i, c := range cols {
			switch c {
			case "table", "type", "key", "rows", "Extra":
				parts = append(parts, vals[i].String)
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	return strings.Join(out, "; "), rows.Err()
}
