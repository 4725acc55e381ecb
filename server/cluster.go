package server

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/model"
)

// WithCluster serves GET /push/cluster from read (the rate budget's
// members and the running chunks, composed by package app).
func WithCluster(read func(ctx context.Context, app string) (model.Cluster, error)) Option {
	return func(s *Server) { s.console.cluster = read }
}

type clusterView struct {
	// App is the app whose budget this is (?app=; the first app's by
	// default): each app's project has a budget of its own.
	App            string         `json:"app"`
	LimitPerSecond float64        `json:"limit_per_second"`
	PausedUntil    *time.Time     `json:"paused_until"`
	Members        []memberView   `json:"members"`
	Chunks         []runningChunk `json:"chunks"`
	Truncated      bool           `json:"truncated"`
}

type memberView struct {
	Instance        string   `json:"instance"`
	Sending         bool     `json:"sending"`
	DemandPerSecond *float64 `json:"demand_per_second"` // null: as much as it gets
	SharePerSecond  float64  `json:"share_per_second"`
	HeartbeatAgeMS  int64    `json:"heartbeat_age_ms"`
	SchemaVersion   int64    `json:"schema_version"`
	Self            bool     `json:"self"`
}

type runningChunk struct {
	BroadcastID uint64    `json:"broadcast_id"`
	Seq         int       `json:"seq"`
	Class       string    `json:"class"`
	Owner       string    `json:"owner"`
	LeaseUntil  time.Time `json:"lease_until"`
	CursorID    uint64    `json:"cursor_id"`
	HiID        uint64    `json:"hi_id"`
}

// getCluster shows the live cluster: the rate budget's members and their
// shares, any 429 pause, and the chunks under a lease.
func (s *Server) getCluster(c echo.Context) error {
	if s.console.cluster == nil {
		return &APIError{Status: http.StatusNotFound, Code: "cluster_unavailable", Message: "this server has no cluster view configured"}
	}
	app := c.QueryParam("app")
	if app == "" {
		app = s.dom.Apps.List[0].Name
		if t := caller(c); t != nil && t.Apps != nil {
			app = t.Apps[0]
		}
	}
	if !s.knownApp(app) {
		return badRequest("unknown_app", "app", "app %q is not configured", app)
	}
	if err := s.mayUseApp(c, app); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.cfg.Timeouts.DB)
	defer cancel()
	cl, err := s.console.cluster(ctx, app)
	if err != nil {
		return err
	}
	out := clusterView{App: app, LimitPerSecond: cl.Limit, PausedUntil: cl.PausedUntil, Truncated: cl.Truncated,
		Members: make([]memberView, 0, len(cl.Members)), Chunks: make([]runningChunk, 0, len(cl.Chunks))}
	for _, m := range cl.Members {
		v := memberView{Instance: m.Instance, Sending: m.Sending, SharePerSecond: math.Round(m.Share*10) / 10,
			HeartbeatAgeMS: m.HeartbeatAge.Milliseconds(), SchemaVersion: m.SchemaVersion, Self: m.Self}
		if !math.IsInf(m.Demand, 1) {
			d := m.Demand
			v.DemandPerSecond = &d
		}
		out.Members = append(out.Members, v)
	}
	for _, r := range cl.Chunks {
		out.Chunks = append(out.Chunks, runningChunk(r))
	}
	return c.JSON(http.StatusOK, out)
}
