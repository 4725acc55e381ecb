package server

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/model"
	"pushfan/server/view"
)

// engagement reads b's engagement for its view.
func (s *Server) engagement(ctx context.Context, b *model.Broadcast) (*view.Engagement, error) {
	return engagementOf(ctx, s.dom.Reader, b)
}

func engagementOf(ctx context.Context, reads Reader, b *model.Broadcast) (*view.Engagement, error) {
	en, names, err := reads.Engagement(ctx, b)
	if err != nil {
		return nil, err
	}
	return view.EngagementOf(b, en, names), nil
}

// seriesBuckets are the bucket widths GET .../engagement takes.
var seriesBuckets = map[string]time.Duration{"1m": time.Minute, "5m": 5 * time.Minute, "15m": 15 * time.Minute, "1h": time.Hour, "1d": 24 * time.Hour}

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
	points, err := s.dom.Reader.EngagementSeries(c.Request().Context(), id, bucket)
	if err != nil {
		return err
	}
	out := view.Series{Bucket: name, Points: []view.SeriesPoint{}}
	for _, p := range points {
		if n := len(out.Points); n == 0 || !out.Points[n-1].At.Equal(p.At) {
			out.Points = append(out.Points, view.SeriesPoint{At: p.At})
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

// EngagementSummary is broadcast id's broadcast.engagement data at stage
// after ("1h", "24h"); nil for a broadcast whose messages carried no event
// token, which has nothing to summarize.
func EngagementSummary(ctx context.Context, reads Reader, id uint64, after string) (any, error) {
	b, err := reads.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if b.Message.Untracked() {
		return nil, nil
	}
	en, err := engagementOf(ctx, reads, b)
	if err != nil {
		return nil, err
	}
	return view.EngagementSummary{BroadcastID: b.ID, After: after, Status: string(b.Status), Targeted: b.Targeted, Succeeded: b.Succeeded,
		Failed: b.Failed, FinishedAt: b.FinishedAt, Engagement: en}, nil
}
