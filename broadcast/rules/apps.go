package rules

import (
	"sort"
	"strings"

	"pushfan/broadcast/instance"
	"pushfan/model"
)

// app resolves a request's app: the named one, which must be configured,
// or the only app when there is one (docs/apps.md). Rules without Apps (a
// test's) know the default app only.
func (r Rules) app(name string) (string, error) {
	apps := r.Apps
	if len(apps) == 0 {
		apps = map[string]float64{model.DefaultApp: r.RateLimit}
	}
	if name == "" {
		if len(apps) == 1 {
			for only := range apps {
				return only, nil
			}
		}
		return "", fieldError("missing_field", "app", "app is required when several apps are configured (%s)", strings.Join(sortedApps(apps), ", "))
	}
	if _, ok := apps[name]; !ok {
		return "", fieldError("unknown_app", "app", "app %q is not configured (the apps are %s)", name, strings.Join(sortedApps(apps), ", "))
	}
	return name, nil
}

// AppOf is the app of that name among this instance's apps (the only app
// for ""), or a *FieldError naming the field app.
func (r Rules) AppOf(apps *instance.Apps, name string) (*instance.App, error) {
	resolved, err := r.app(name)
	if err != nil {
		return nil, err
	}
	app, ok := apps.Get(resolved)
	if !ok {
		return nil, fieldError("unknown_app", "app", "app %q is not configured on this instance", resolved)
	}
	return app, nil
}

// BudgetOf is app's rate limit, which a broadcast's pacing must fit in.
func (r Rules) BudgetOf(app string) float64 {
	if limit, ok := r.Apps[app]; ok && limit > 0 {
		return limit
	}
	return r.RateLimit
}

// AudienceApp refuses a named audience of another app: its SQL returns
// that app's tokens, which app's project cannot send to.
func (r Rules) AudienceApp(a model.Audience, app string) error {
	if a.Name == "" {
		return nil
	}
	if n, ok := r.Named.Load().Get(a.Name); ok && n.App != app {
		return fieldError("audience_of_another_app", "audience.name", "named audience %q belongs to app %q, not %q", a.Name, n.App, app)
	}
	return nil
}

func sortedApps(apps map[string]float64) []string {
	out := make([]string, 0, len(apps))
	for a := range apps {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}
