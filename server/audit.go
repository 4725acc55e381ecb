package server

import (
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/model"
	"pushfan/server/audittrail"
)

// AuditLog reads the audit trail (audit.Store), for the routes of
// package server/audittrail.
type AuditLog = audittrail.Log

// auditChanges is the mutating routes' middleware (audittrail.Changes):
// each request's entry, written with its change.
func (s *Server) auditChanges() echo.MiddlewareFunc {
	m := &audittrail.Changes{Recorder: s.audit, Log: s.log, Now: func() time.Time { return s.now() },
		Actor: func(c echo.Context) *model.Actor {
			if p := caller(c); p != nil {
				return &p.Actor
			}
			return nil
		}}
	return m.Middleware
}
