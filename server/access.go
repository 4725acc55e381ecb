package server

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"pushfan/model"
)

// Principal is who a request acts for: a token from the environment, an
// API key or a signed-in person (the Actor), with the role and the apps
// that bound what it may do.
type Principal struct {
	model.Actor
	Role model.Role
	// Apps are the apps it may use; nil: every app.
	Apps []string
}

// mayUse reports whether p may use app.
func (p *Principal) mayUse(app string) bool { return p.Apps == nil || slices.Contains(p.Apps, app) }

// budgetKey names p in the per-caller budgets (submits, test sends): a
// person and a token of the same name are two callers.
func (p *Principal) budgetKey() string { return string(p.Kind) + ":" + p.ID }

// principal is the environment token t as a principal.
func (t *Token) principal() *Principal {
	return &Principal{Actor: model.Actor{Kind: model.ActorToken, ID: t.Name, Name: t.Name}, Role: t.Role, Apps: t.Apps}
}

// neededRole is the least role a route needs (echo's route path, as
// c.Path() gives it). Reading needs a viewer, changing a sender; the
// exceptions are listed here, in one place, so that a route's rule is
// found without reading its handler:
//   - the previews are POSTs (a body describes what to count) that change
//     nothing, and a viewer may count;
//   - releasing a held broadcast is an approver's;
//   - keys, webhooks, reloads, settings, the audit trail and the cron
//     jobs' controls (pause, resume, run now) are an admin's.
func neededRole(method, path string) model.Role {
	switch {
	case method == http.MethodPost && (path == "/push/preview" || path == "/push/audiences/:name/preview" || path == "/push/segments/preview"):
		return model.RoleViewer
	case method == http.MethodPost && path == "/push/broadcasts/:id/release":
		return model.RoleApprover
	case path == "/push/audiences/reload",
		strings.HasPrefix(path, "/push/keys"),
		strings.HasPrefix(path, "/push/audit"),
		strings.HasPrefix(path, "/push/settings"), strings.HasPrefix(path, "/push/cron/") && !safeMethod(method),
		strings.HasPrefix(path, "/push/webhooks") && !safeMethod(method):
		return model.RoleAdmin
	case safeMethod(method):
		return model.RoleViewer
	default:
		return model.RoleSender
	}
}

// authorize refuses (403, naming the role needed) a principal whose role
// does not include the route's.
func authorize(c echo.Context, p *Principal) error {
	need := neededRole(c.Request().Method, c.Path())
	if p.Role.Includes(need) {
		return nil
	}
	return &APIError{Status: http.StatusForbidden, Code: "forbidden",
		Message: string(p.Kind) + " " + p.Name + " has the " + string(p.Role) + " role; " + c.Request().Method + " " + c.Path() + " needs " + string(need) + " or above"}
}

// Auditor appends entries to the audit trail (package audit's store). A
// route's change writes its entry in the change's own transaction; Record
// is for what changes nothing else, such as a sign-in or a refused one.
type Auditor interface {
	Record(ctx context.Context, e model.AuditEntry) error
}
