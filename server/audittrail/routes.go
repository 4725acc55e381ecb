// Package audittrail is the API's routes of the audit trail
// (docs/audit.md): GET /push/audit, a page of entries newest first with
// the cursor of the next, and GET /push/audit/export, every entry the
// filters select as NDJSON, streamed a page at a time.
//
// HTTP only, like package server, which registers the routes in its
// /push group behind its auth (an admin's: neededRole). Every refused
// parameter is an *audit.FieldError naming it, which the server's one
// error handler answers as a 400. Nothing here changes an entry: the
// trail is appended to by the changes themselves (package audit).
package audittrail

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"pushfan/audit"
	"pushfan/model"
)

// Log reads the audit trail (audit.Store).
type Log interface {
	List(ctx context.Context, f audit.Filter) ([]model.AuditEntry, uint64, error)
	Export(ctx context.Context, f audit.Filter, fn func(model.AuditEntry) error) error
}

// Routes serve the audit trail.
type Routes struct {
	// Log is the trail; nil serves an empty one (the contract tests').
	Log Log
	// Logger logs an export cut short after its status went out.
	Logger *slog.Logger
}

// Register serves the routes in g (the /push group).
func (r *Routes) Register(g *echo.Group) {
	g.GET("/audit", r.list)
	g.GET("/audit/export", r.export)
}

// page is GET /push/audit's answer.
type page struct {
	Entries []model.AuditEntry `json:"entries"`
	// Next is the cursor of the next (older) page, for after; null on
	// the last.
	Next *string `json:"next"`
}

func refuse(field, code, format string, args ...any) *audit.FieldError {
	return &audit.FieldError{Field: field, Code: code, Message: fmt.Sprintf(format, args...)}
}

// filter reads the routes' query: actor, action, target, after, limit.
func filter(c echo.Context) (audit.Filter, error) {
	f := audit.Filter{Actor: c.QueryParam("actor"), Action: c.QueryParam("action"), Target: c.QueryParam("target"), Limit: audit.DefaultLimit}
	for _, p := range []struct{ name, v string }{{"actor", f.Actor}, {"action", f.Action}, {"target", f.Target}} {
		if len(p.v) > 255 {
			return f, refuse(p.name, "invalid_value", "%s is %d bytes; at most 255", p.name, len(p.v))
		}
	}
	if q := c.QueryParam("after"); q != "" {
		n, err := strconv.ParseUint(q, 10, 64)
		if err != nil || n == 0 {
			return f, refuse("after", "invalid_cursor", "after %q is not a cursor this API returned (the next of a page)", q)
		}
		f.After = n
	}
	if q := c.QueryParam("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > audit.MaxLimit {
			return f, refuse("limit", "invalid_value", "limit must be an integer from 1 to %d", audit.MaxLimit)
		}
		f.Limit = n
	}
	return f, nil
}

func (r *Routes) list(c echo.Context) error {
	f, err := filter(c)
	if err != nil {
		return err
	}
	out := page{Entries: []model.AuditEntry{}}
	if r.Log == nil {
		return c.JSON(http.StatusOK, out)
	}
	entries, next, err := r.Log.List(c.Request().Context(), f)
	if err != nil {
		return err
	}
	if entries != nil {
		out.Entries = entries
	}
	if next != 0 {
		n := strconv.FormatUint(next, 10)
		out.Next = &n
	}
	return c.JSON(http.StatusOK, out)
}

// export streams every entry the filters select (limit is ignored) as
// NDJSON, newest first: one line an entry, read a page at a time, so its
// memory is one page whatever the trail's length.
func (r *Routes) export(c echo.Context) error {
	f, err := filter(c)
	if err != nil {
		return err
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="pushfan-audit.ndjson"`)
	if r.Log == nil {
		w.WriteHeader(http.StatusOK)
		return nil
	}
	enc := json.NewEncoder(w)
	started := false
	err = r.Log.Export(c.Request().Context(), f, func(e model.AuditEntry) error {
		if !started {
			w.WriteHeader(http.StatusOK)
			started = true
		}
		return enc.Encode(e)
	})
	switch {
	case err != nil && started:
		// The status is sent: the stream ends short, and the log says why.
		r.Logger.WarnContext(c.Request().Context(), "audit export ended early", "err", err)
		return nil
	case err != nil:
		return err
	case !started:
		w.WriteHeader(http.StatusOK)
	}
	return nil
}
