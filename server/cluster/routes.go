// Package cluster is the API's live view of the cluster (GET
// /push/cluster): an app's rate budget, its members and their shares, any
// 429 pause, and the chunks under a lease; what the console's Cluster page
// shows.
//
// HTTP only, like package server, which registers the route in its /push
// group behind its auth (a viewer reads) and passes in the read and the
// app rules of the caller.
package cluster

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/model"
	"pushfan/server/apierror"
)

// Routes serve the cluster view.
type Routes struct {
	// Read composes an app's view (package app); nil: no view configured.
	Read func(ctx context.Context, app string) (model.Cluster, error)
	// DefaultApp is the app shown without ?app=: the caller's first.
	DefaultApp func(c echo.Context) string
	// CheckApp refuses an unknown app, or one the caller may not use.
	CheckApp func(c echo.Context, app string) error
	// Timeout bounds the read (the database's timeout).
	Timeout time.Duration
}

// Register serves the route in g (the /push group).
func (r *Routes) Register(g *echo.Group) {
	g.GET("/cluster", r.get)
}

type view struct {
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

func (r *Routes) get(c echo.Context) error {
	if r.Read == nil {
		return &apierror.Error{Status: http.StatusNotFound, Code: "cluster_unavailable", Message: "this server has no cluster view configured"}
	}
	app := c.QueryParam("app")
	if app == "" {
		app = r.DefaultApp(c)
	}
	if err := r.CheckApp(c, app); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), r.Timeout)
	defer cancel()
	cl, err := r.Read(ctx, app)
	if err != nil {
		return err
	}
	out := view{App: app, LimitPerSecond: cl.Limit, PausedUntil: cl.PausedUntil, Truncated: cl.Truncated,
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
	for _, ch := range cl.Chunks {
		out.Chunks = append(out.Chunks, runningChunk(ch))
	}
	return c.JSON(http.StatusOK, out)
}
