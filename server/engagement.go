package server

import (
	"context"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/broadcast/reads"
	"pushfan/model"
)

// engagementView is a broadcast's funnel after FCM accepted its sends:
// distinct targets per event type.
type engagementView struct {
	countsView
	// OpenRate is opened / succeeded (0 before any success).
	OpenRate float64 `json:"open_rate"`
	// TimeToOpen is from send to open, in seconds (within 5 %: a
	// histogram of 10 %-wide buckets); absent before any open.
	TimeToOpenP50 *float64 `json:"time_to_open_p50_s,omitempty"`
	TimeToOpenP90 *float64 `json:"time_to_open_p90_s,omitempty"`
	// Localized breaks the counts down by localized variant (language,
	// or "default"; a broadcast without A/B variants).
	Localized map[string]countsView `json:"localized,omitzero"`
	// Variants compares the A/B variants, in their order.
	Variants []abView `json:"variants,omitempty"`
}

// abView is one A/B variant's funnel, and its open rate against the first
// variant's: the difference and its 95 % confidence interval (normal
// approximation of two proportions; null until both have sends).
type abView struct {
	Name string `json:"name"`
	Sent int64  `json:"sent"`
	countsView
	OpenRate float64     `json:"open_rate"`
	Diff     *float64    `json:"open_rate_diff,omitempty"`
	CI95     *[2]float64 `json:"open_rate_diff_ci95,omitempty"`
}

type countsView struct {
	Received  int64 `json:"received"`
	Opened    int64 `json:"opened"`
	Clicked   int64 `json:"clicked"`
	Dismissed int64 `json:"dismissed"`
}

func countsOf(c model.EventCounts) countsView {
	return countsView{Received: c.Received, Opened: c.Opened, Clicked: c.Clicked, Dismissed: c.Dismissed}
}

// engagement reads b's engagement for its view.
func (s *Server) engagement(ctx context.Context, b *model.Broadcast) (*engagementView, error) {
	return engagementOf(ctx, s.reads, b)
}

func engagementOf(ctx context.Context, rd *reads.Reader, b *model.Broadcast) (*engagementView, error) {
	en, names, err := rd.Engagement(ctx, b)
	if err != nil {
		return nil, err
	}
	v := &engagementView{countsView: countsView{Received: en.Received, Opened: en.Opened, Clicked: en.Clicked, Dismissed: en.Dismissed}}
	if b.Succeeded > 0 {
		v.OpenRate = float64(en.Opened) / float64(b.Succeeded)
	}
	seconds := func(d *time.Duration) *float64 {
		if d == nil {
			return nil
		}
		f := d.Seconds()
		return &f
	}
	v.TimeToOpenP50, v.TimeToOpenP90 = seconds(en.TimeToOpenP50), seconds(en.TimeToOpenP90)
	if vs := b.Message.Variants; len(vs) > 0 {
		v.Variants = abViews(vs, b.Variants, en.ByVariant)
		return v, nil
	}
	for i, c := range en.ByLocalized {
		if i < 1 || i > len(names) {
			continue // 0: sent without variants
		}
		if v.Localized == nil {
			v.Localized = map[string]countsView{}
		}
		v.Localized[names[i-1]] = countsOf(c)
	}
	return v, nil
}

// seriesBuckets are the bucket widths GET .../engagement takes.
var seriesBuckets = map[string]time.Duration{"1m": time.Minute, "5m": 5 * time.Minute, "15m": 15 * time.Minute, "1h": time.Hour, "1d": 24 * time.Hour}

type seriesView struct {
	Bucket string        `json:"bucket"`
	Points []seriesPoint `json:"points"`
}

type seriesPoint struct {
	At time.Time `json:"at"`
	countsView
}

// engagementSeries is GET /push/broadcasts/{id}/engagement?bucket=1m: the
// events per bucket, oldest first, for the console's opens-over-time chart.
func (s *Server) engagementSeries(c echo.Context) error {
	id, err := parseID(c)
	if err != nil {
		return err
	}
	name := c.QueryParam("bucket")
	if name == "" {
		name = "1m"
	}
	bucket, ok := seriesBuckets[name]
	if !ok {
		return badRequest("invalid_value", "bucket", "bucket must be 1m, 5m, 15m, 1h or 1d, got %q", name)
	}
	points, err := s.reads.EngagementSeries(c.Request().Context(), id, bucket)
	if err != nil {
		return err
	}
	out := seriesView{Bucket: name, Points: []seriesPoint{}}
	for _, p := range points {
		if n := len(out.Points); n == 0 || !out.Points[n-1].At.Equal(p.At) {
			out.Points = append(out.Points, seriesPoint{At: p.At})
		}
		last := &out.Points[len(out.Points)-1]
		var ec model.EventCounts
		ec.Add(p.Type, p.N)
		last.Received += ec.Received
		last.Opened += ec.Opened
		last.Clicked += ec.Clicked
		last.Dismissed += ec.Dismissed
	}
	return c.JSON(http.StatusOK, out)
}

// abViews compares A/B variants: sent is the targets the engine sent each
// (its localized ones summed), counts[i+1] the events of variant i.
func abViews(vs []model.ABVariant, sent map[string]int64, counts map[int]model.EventCounts) []abView {
	out := make([]abView, len(vs))
	for i, ab := range vs {
		a := abView{Name: ab.Name, countsView: countsOf(counts[i+1])}
		for name, n := range sent {
			if name == ab.Name || strings.HasPrefix(name, ab.Name+":") {
				a.Sent += n
			}
		}
		if a.Sent > 0 {
			a.OpenRate = float64(a.Opened) / float64(a.Sent)
		}
		out[i] = a
	}
	base := out[0]
	for i := 1; i < len(out); i++ {
		x := &out[i]
		if x.Sent == 0 || base.Sent == 0 {
			continue
		}
		d := x.OpenRate - base.OpenRate
		se := math.Sqrt(x.OpenRate*(1-x.OpenRate)/float64(x.Sent) + base.OpenRate*(1-base.OpenRate)/float64(base.Sent))
		x.Diff, x.CI95 = &d, &[2]float64{d - 1.96*se, d + 1.96*se}
	}
	return out
}

// engagementSummary is broadcast.engagement's data: the broadcast's
// outcome and its funnel (the API's engagement object) at a stage.
type engagementSummary struct {
	BroadcastID uint64          `json:"broadcast_id"`
	After       string          `json:"after"`
	Status      string          `json:"status"`
	Targeted    int64           `json:"targeted"`
	Succeeded   int64           `json:"succeeded"`
	Failed      int64           `json:"failed"`
	FinishedAt  *time.Time      `json:"finished_at"`
	Engagement  *engagementView `json:"engagement"`
}

// EngagementSummary is broadcast id's broadcast.engagement data at stage
// after ("1h", "24h"); nil for a broadcast whose messages carried no event
// token, which has nothing to summarize.
func EngagementSummary(ctx context.Context, rd *reads.Reader, id uint64, after string) (any, error) {
	b, err := rd.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if b.Message.Untracked() {
		return nil, nil
	}
	en, err := engagementOf(ctx, rd, b)
	if err != nil {
		return nil, err
	}
	return engagementSummary{BroadcastID: b.ID, After: after, Status: string(b.Status), Targeted: b.Targeted, Succeeded: b.Succeeded,
		Failed: b.Failed, FinishedAt: b.FinishedAt, Engagement: en}, nil
}
