package campaigns

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/lease/sends"
	"pushfan/model"
)

// Reader reads the campaigns from the database.
type Reader struct {
	DB *sql.DB
	// Timeout bounds a report's reads (0: 30 s).
	Timeout time.Duration
}

// Row is one group's totals in one period.
type Row struct {
	Group       string    `json:"group"`
	PeriodStart time.Time `json:"period_start"`
	Totals
}

// Totals are the summed counters of some broadcasts and their two ratios.
type Totals struct {
	Broadcasts int64 `json:"broadcasts"`
	Targeted   int64 `json:"targeted"`
	Succeeded  int64 `json:"succeeded"`
	Failed     int64 `json:"failed"`
	Opened     int64 `json:"opened"`
	Clicked    int64 `json:"clicked"`
	// Reach is succeeded ÷ targeted (0 with nothing targeted).
	Reach float64 `json:"reach"`
	// CTR is clicked ÷ succeeded: clicks of the sends FCM accepted (0
	// with none).
	CTR float64 `json:"ctr"`
}

func (t *Totals) add(b *sent) {
	t.Broadcasts++
	t.Targeted += b.targeted
	t.Succeeded += b.succeeded
	t.Failed += b.failed
	t.Opened += b.opened
	t.Clicked += b.clicked
}

func (t *Totals) ratios() {
	t.Reach, t.CTR = ratio(t.Succeeded, t.Targeted), ratio(t.Clicked, t.Succeeded)
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// sent is one finished broadcast's counters.
type sent struct {
	id                                           uint64
	finished                                     time.Time
	group, app                                   string
	targeted, succeeded, failed, opened, clicked int64
	// plat are its sends per platform (model.Platforms' order), platOK
	// whether they are its succeeded and failed exactly (see platformsOf).
	plat   [4]sends.Sent
	platOK bool
	// recovered is how many of its failures its resends moved to succeeded.
	recovered int64
	// resends are the ids of the resends folded into it (their events
	// are in opened and clicked).
	resends []uint64
}

// platformsOf reads a broadcast's sends per platform (sends.PlatformColumns)
// from vals, and says whether they are its counters split exactly: they
// sum to succeeded and failed. They do not for a broadcast sent before
// they were counted (0 in every column), nor where a cancel's close moved
// a fenced holder's sends out of canceled (its counters grew, without a
// platform).
func platformsOf(vals *[8]int64, succeeded, failed int64) (plat [4]sends.Sent, ok bool) {
	var sOK, sFail int64
	for i := range plat {
		plat[i] = sends.Sent{Succeeded: vals[2*i], Failed: vals[2*i+1]}
		sOK, sFail = sOK+vals[2*i], sFail+vals[2*i+1]
	}
	return plat, sOK == succeeded && sFail == failed
}

// platformDests are Scan's destinations for the platform columns.
func platformDests(vals *[8]int64) []any {
	out := make([]any, len(vals))
	for i := range vals {
		out[i] = &vals[i]
	}
	return out
}

// groupColumn is the SQL of a broadcast's group value ("" for none). The
// label is the message's fcm_options.analytics_label, its first A/B
// variant's with variants (model.Message.AnalyticsLabel): read from the
// message only when grouping by it.
func groupColumn(g Group) string {
	switch g {
	case ByJob:
		return "COALESCE(b.job_name, '')"
	case ByLabel:
		return `COALESCE(JSON_UNQUOTE(JSON_EXTRACT(b.message, '$.fcm_options.analytics_label')),
			JSON_UNQUOTE(JSON_EXTRACT(b.message, '$.variants[0].fcm_options.analytics_label')), '')`
	default:
		return "COALESCE(b.category, '')"
	}
}

// finished reads q's broadcasts, one row each (see the package doc for
// the cost), with their resends folded in (recovered).
func (r *Reader) finished(ctx context.Context, q Query) ([]sent, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	out, err := r.originals(ctx, q)
	if err != nil {
		return nil, err
	}
	return out, r.recovered(ctx, q, out)
}

// originals reads q's broadcasts but resends: a resend sends again to its
// original's failures, so it is no campaign of its own.
func (r *Reader) originals(ctx context.Context, q Query) ([]sent, error) {
	col := groupColumn(q.Group)
	where := []string{"b.finished_at >= ?", "b.finished_at < ?", "b.dry_run = 0", "b.parent_id IS NULL"}
	args := []any{uint8(model.EventOpened), uint8(model.EventClicked), q.From.UTC(), q.To.UTC()}
	if q.Apps != nil {
		if len(q.Apps) == 0 {
			return nil, nil
		}
		where = append(where, "b.app IN ("+sqldb.InList(len(q.Apps))+")")
		for _, a := range q.Apps {
			args = append(args, a)
		}
	}
	if q.Key != nil {
		where = append(where, col+" = ?")
		args = append(args, *q.Key)
	}
	// The engagement counts are a row per broadcast, variant, localized
	// variant and type: a look-up of their key's prefix per broadcast.
	rows, err := r.DB.QueryContext(ctx, `SELECT b.id, b.finished_at, `+col+`, b.app, b.targeted, b.succeeded, b.failed,
			(SELECT COALESCE(SUM(c.n), 0) FROM engagement_counts c WHERE c.broadcast_id = b.id AND c.type = ?),
			(SELECT COALESCE(SUM(c.n), 0) FROM engagement_counts c WHERE c.broadcast_id = b.id AND c.type = ?),
			`+sends.PlatformColumns("b")+`
		FROM broadcasts b WHERE `+strings.Join(where, " AND "), args...)
	if err != nil {
		return nil, fmt.Errorf("campaigns: read broadcasts: %w", err)
	}
	defer rows.Close()
	var out []sent
	var plat [8]int64
	for rows.Next() {
		var s sent
		if err := rows.Scan(append([]any{&s.id, &s.finished, &s.group, &s.app, &s.targeted, &s.succeeded, &s.failed, &s.opened, &s.clicked}, platformDests(&plat)...)...); err != nil {
			return nil, fmt.Errorf("campaigns: read broadcasts: %w", err)
		}
		s.plat, s.platOK = platformsOf(&plat, s.succeeded, s.failed)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("campaigns: read broadcasts: %w", err)
	}
	return out, nil
}

// Trends sums q's broadcasts per group and period, ordered by group, then
// period. Periods without a broadcast of the group have no row.
func (r *Reader) Trends(ctx context.Context, q Query) ([]Row, error) {
	bs, err := r.finished(ctx, q)
	if err != nil {
		return nil, err
	}
	type key struct {
		group string
		start int64
	}
	sums := map[key]*Row{}
	for i := range bs {
		b := &bs[i]
		start := PeriodStart(b.finished, q.Interval, q.Loc)
		k := key{b.group, start.Unix()}
		row := sums[k]
		if row == nil {
			row = &Row{Group: b.group, PeriodStart: start}
			sums[k] = row
		}
		row.add(b)
	}
	out := make([]Row, 0, len(sums))
	for _, row := range sums {
		row.ratios()
		out = append(out, *row)
	}
	slices.SortFunc(out, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), a.PeriodStart.Compare(b.PeriodStart))
	})
	return out, nil
}

// recovered folds the resends of out's broadcasts into them: a target a
// resend reached moves from its original's failed to its succeeded (its
// opens and clicks count there too), and neither the broadcasts nor
// targeted grow (a resend's targets are its original's failures).
// Resends of resends count toward the first original; what moves is at
// most the original's failed, in any order. A resend finishes after its
// original, so only those finished from q.From on are read (the
// finished_at index).
func (r *Reader) recovered(ctx context.Context, q Query, out []sent) error {
	if len(out) == 0 {
		return nil
	}
	byID := make(map[uint64]int, len(out))
	for i, s := range out {
		byID[s.id] = i
	}
	rows, err := r.DB.QueryContext(ctx, `SELECT b.id, b.parent_id, b.succeeded, b.failed,
			(SELECT COALESCE(SUM(c.n), 0) FROM engagement_counts c WHERE c.broadcast_id = b.id AND c.type = ?),
			(SELECT COALESCE(SUM(c.n), 0) FROM engagement_counts c WHERE c.broadcast_id = b.id AND c.type = ?),
			`+sends.PlatformColumns("b")+`
		FROM broadcasts b WHERE b.finished_at >= ? AND b.parent_id IS NOT NULL AND b.dry_run = 0`,
		uint8(model.EventOpened), uint8(model.EventClicked), q.From.UTC())
	if err != nil {
		return fmt.Errorf("campaigns: read resends: %w", err)
	}
	defer rows.Close()
	parent := map[uint64]uint64{}
	gained := map[uint64]sent{}
	var plat [8]int64
	for rows.Next() {
		var id, p uint64
		var g sent
		if err := rows.Scan(append([]any{&id, &p, &g.succeeded, &g.failed, &g.opened, &g.clicked}, platformDests(&plat)...)...); err != nil {
			return fmt.Errorf("campaigns: read resends: %w", err)
		}
		g.plat, g.platOK = platformsOf(&plat, g.succeeded, g.failed)
		parent[id], gained[id] = p, g
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("campaigns: read resends: %w", err)
	}
	// A resend's id is above its parent's: walking up ends.
	for id, g := range gained {
		root := parent[id]
		for {
			p, ok := parent[root]
			if !ok {
				break
			}
			root = p
		}
		if i, ok := byID[root]; ok {
			s := &out[i]
			n := min(g.succeeded, s.failed)
			s.succeeded += n
			s.failed -= n
			s.recovered += n
			s.resends = append(s.resends, id)
			s.opened += g.opened
			s.clicked += g.clicked
			s.platOK = s.platOK && g.platOK && movePlatforms(&s.plat, g.plat) == n
		}
	}
	return nil
}

// movePlatforms moves a resend's successes per platform from its
// original's failed to succeeded, at most the original's failed on each,
// and returns how many moved: the resend's targets are the original's
// failures, so it is what moved in all unless a token changed platform
// between the two sends (the caller then reads the split as not exact).
func movePlatforms(orig *[4]sends.Sent, resend [4]sends.Sent) int64 {
	var moved int64
	for i := range orig {
		n := min(resend[i].Succeeded, orig[i].Failed)
		orig[i].Succeeded += n
		orig[i].Failed -= n
		moved += n
	}
	return moved
}

// timeout bounds a report's reads (the database's timeout).
func (r *Reader) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return 30 * time.Second
}
