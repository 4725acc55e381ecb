package server

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"pushfan/audit"
)

// TestEveryMutatingRouteHasAnAuditRule walks every POST, PUT, PATCH and
// DELETE of the OpenAPI document (which TestOpenAPIDocumentMatchesRoutes
// holds equal to the served routes) and fails for one without a line in
// audit's table: a new route cannot forget its entry. The table has no
// line for a route that does not exist, and each line names an action
// unless it is not a change. Which routes write their entry with their
// change is proven on a real database in audit_stack_test.go.
func TestEveryMutatingRouteHasAnAuditRule(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	documented := map[string]bool{}
	mutating := 0
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions {
				continue
			}
			mutating++
			echoPath := openAPIParam.ReplaceAllString(path, ":$1")
			documented[method+" "+echoPath] = true
			r, ok := audit.RuleFor(method, echoPath)
			switch {
			case !ok:
				t.Errorf("%s %s changes something but has no line in audit's table (audit/actions.go): name its action", method, path)
			case r.When != audit.NotAChange && r.Action == "":
				t.Errorf("%s %s: its rule names no action", method, path)
			case r.When == 0:
				t.Errorf("%s %s: its rule says not when its entry is written", method, path)
			}
			if ok && strings.Contains(r.Target, "{") {
				for _, p := range openAPIParam.FindAllStringSubmatch(r.Target, -1) {
					if !strings.Contains(path, "{"+p[1]+"}") {
						t.Errorf("%s %s: its target %q names {%s}, which is not a parameter of the path", method, path, r.Target, p[1])
					}
				}
			}
		}
	}
	for _, r := range audit.Rules() {
		if !documented[r.Method+" "+r.Path] {
			t.Errorf("audit's table has %s %s, which the OpenAPI document has not", r.Method, r.Path)
		}
	}
	if mutating < 15 {
		t.Errorf("only %d mutating operations in the document: the walk is broken", mutating)
	}
}

// openAPIParam is a path parameter as the document (and audit's targets)
// write it: {id}.
var openAPIParam = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)
