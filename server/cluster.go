package server

import (
	"context"

	"github.com/labstack/echo/v4"

	"pushfan/model"
	"pushfan/server/cluster"
)

// WithCluster serves GET /push/cluster from read (the rate budget's
// members and the running chunks, composed by package app).
func WithCluster(read func(ctx context.Context, app string) (model.Cluster, error)) Option {
	return func(s *Server) { s.console.cluster = read }
}

// clusterRoutes: the view of the caller's first app unless ?app= names
// one it may use.
func (s *Server) clusterRoutes() *cluster.Routes {
	return &cluster.Routes{Read: s.console.cluster, Timeout: s.cfg.Timeouts.DB,
		DefaultApp: func(c echo.Context) string {
			if t := caller(c); t != nil && t.Apps != nil {
				return t.Apps[0]
			}
			return s.dom.Apps.List[0].Name
		},
		CheckApp: func(c echo.Context, app string) error {
			if !s.knownApp(app) {
				return badRequest("unknown_app", "app", "app %q is not configured", app)
			}
			return s.mayUseApp(c, app)
		}}
}
