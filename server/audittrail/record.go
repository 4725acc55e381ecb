package audittrail

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/audit"
	"pushfan/internal/platform/logging"
	"pushfan/model"
)

// Recorder appends entries in a transaction of their own (audit.Store).
type Recorder interface {
	Record(ctx context.Context, e model.AuditEntry) error
}

// Changes is the middleware of the mutating routes: it puts the entry a
// route will record (audit's table names its action and target) in the
// request's context, for the domain code that stores the change to write
// in its transaction (audit.Write). A route whose change is in no table
// (audit.AfterAnswer) has its entry recorded here once it answered with
// success; so has a request that succeeded without its change writing one
// (a repeat that changed nothing: an idempotent submit, a job's fire
// already made). A failed request records nothing: its change rolled
// back with its entry, or was never made.
type Changes struct {
	// Actor is who the request acts for (nil before a handler knows:
	// a sign-out names it with audit.SetActor).
	Actor func(c echo.Context) *model.Actor
	// Recorder is nil when nothing is recorded after an answer (the
	// contract tests, with no database).
	Recorder Recorder
	Log      *slog.Logger
	Now      func() time.Time
}

// Middleware is the middleware of a group of routes.
func (m *Changes) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		rule, ok := audit.RuleFor(c.Request().Method, c.Path())
		if !ok || rule.When == audit.NotAChange || rule.When == audit.ByHandler {
			return next(c)
		}
		ctx := c.Request().Context()
		e := model.AuditEntry{At: m.Now().UTC(), Action: rule.Action, Target: rule.TargetOf(c.Param),
			IP: c.RealIP(), RequestID: logging.RequestID(ctx)}
		if a := m.Actor(c); a != nil {
			e.Actor = *a
		}
		ctx = audit.WithPending(ctx, e)
		for _, k := range rule.Detail {
			audit.SetDetail(ctx, k, c.Param(k))
		}
		c.SetRequest(c.Request().WithContext(ctx))
		err := next(c)
		if err != nil || c.Response().Status >= http.StatusBadRequest {
			return err
		}
		entry, written, _ := audit.Pending(ctx)
		if written || m.Recorder == nil {
			return nil
		}
		if rule.When == audit.InChange {
			// A repeat: an idempotent replay says so, others (a cancel of
			// a canceled broadcast) are recorded as they came.
			if c.Response().Header().Get("Idempotent-Replayed") == "true" {
				audit.SetDetail(ctx, "replayed", true)
				entry, _, _ = audit.Pending(ctx)
			}
			m.Log.InfoContext(ctx, "a change answered without writing its audit entry (a repeat that changed nothing); recording it now",
				"action", entry.Action, "target", entry.Target)
		}
		// The answer is out: the entry is written even if the client left.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := m.Recorder.Record(wctx, entry); err != nil {
			m.Log.ErrorContext(ctx, "recording an audit entry failed", "action", entry.Action, "target", entry.Target, "err", err)
		}
		return nil
	}
}
