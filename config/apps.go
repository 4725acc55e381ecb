package config

import (
	"fmt"
	"net/url"
	"os"
	"regexp"

	"pushfan/model"
)

// App is one Firebase project pushfan sends for, as the YAML's `apps:`
// section gives it (docs/apps.md). Without that section the environment's
// FCM settings make one app, model.DefaultApp.
type App struct {
	Name      string `yaml:"name"`
	ProjectID string `yaml:"project_id"`
	// Credentials is the project's service-account file; it defaults to
	// GOOGLE_APPLICATION_CREDENTIALS, and an emulator needs none.
	Credentials string `yaml:"credentials"`
	// Endpoint is an emulator's URL; it defaults to PUSHFAN_FCM_ENDPOINT.
	Endpoint string `yaml:"endpoint"`
	// RateLimit is the project's quota in messages a second, shared by
	// every instance; it defaults to PUSHFAN_RATE_LIMIT.
	RateLimit float64 `yaml:"rate_limit"`
	// Schema maps this app's own users and tokens tables; it defaults to
	// the top-level schema: mapping (or the bundled tables).
	Schema *model.SchemaMapping `yaml:"schema"`
	// Audiences are named audiences of this app only.
	Audiences []Audience `yaml:"audiences"`
	// Delivery replaces the deployment's delivery defaults (priority and
	// TTL by class) where it sets a field (DeliveryOf).
	Delivery *model.DeliveryDefaults `yaml:"delivery"`
}

// appName is what an app may be called: it appears in URLs, metric
// labels and (as a literal) in the SQL that keeps an app's tokens.
var appName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidAppName reports whether s may name an app.
func ValidAppName(s string) bool { return appName.MatchString(s) }

// AppList is the apps this configuration sends for, every default filled
// in: the `apps:` section, or the environment's one app, "default".
func (c *Config) AppList() []App {
	if len(c.Apps) == 0 {
		return []App{{Name: model.DefaultApp, ProjectID: c.FCMProjectID, Credentials: c.CredentialsFile, Endpoint: c.FCMEndpoint, RateLimit: c.Engine.RateLimit}}
	}
	out := make([]App, len(c.Apps))
	for i, a := range c.Apps {
		if a.Endpoint == "" {
			a.Endpoint = c.FCMEndpoint
		}
		if a.Credentials == "" && a.Endpoint == "" {
			a.Credentials = c.CredentialsFile
		}
		if a.RateLimit == 0 {
			a.RateLimit = c.Engine.RateLimit
		}
		out[i] = a
	}
	return out
}

// AppNames are the configured apps' names, in configuration order.
func (c *Config) AppNames() []string {
	apps := c.AppList()
	out := make([]string, len(apps))
	for i, a := range apps {
		out[i] = a.Name
	}
	return out
}

// DeliveryOf is app's delivery defaults: the deployment's, with the
// fields of the app's own delivery: over them.
func (c *Config) DeliveryOf(app App) model.DeliveryDefaults {
	return c.Delivery.Over(app.Delivery)
}

// SchemaOf is the table mapping app's built-in audiences read: its own,
// or the top-level one.
func (c *Config) SchemaOf(app App) model.SchemaMapping {
	if app.Schema != nil {
		return *app.Schema
	}
	return c.Schema
}

// AllAudiences are the named audiences of every app: the top-level ones
// and each app's own, the latter with App set to their app.
func (c *Config) AllAudiences() []Audience {
	out := append([]Audience(nil), c.Audiences...)
	for _, a := range c.Apps {
		for _, au := range a.Audiences {
			au.App = a.Name
			out = append(out, au)
		}
	}
	return out
}

// AppOf is the app a named audience or job that names app belongs to:
// app itself, or the only app when it names none ("" when it names none
// and there are several: validateApps refuses that).
func (c *Config) AppOf(app string) string {
	if app != "" {
		return app
	}
	if apps := c.AppList(); len(apps) == 1 {
		return apps[0].Name
	}
	return ""
}

// validateApps checks the apps: section, and that every audience and job
// names a configured app (required with several apps).
func (c *Config) validateApps(bad func(name, format string, args ...any)) {
	names := map[string]bool{}
	projects := map[string]string{}
	for i, a := range c.Apps {
		key := fmt.Sprintf("apps[%d]", i)
		if !ValidAppName(a.Name) {
			bad(key+".name", "%q must be 1-64 lower-case letters, digits, '_' or '-', starting with a letter or digit", a.Name)
		} else if names[a.Name] {
			bad(key+".name", "%q names two apps", a.Name)
		} else {
			key = "apps." + a.Name
		}
		names[a.Name] = true
		if a.ProjectID == "" {
			bad(key+".project_id", "required (the Firebase project's id)")
		} else if other, ok := projects[a.ProjectID]; ok {
			bad(key+".project_id", "%q is app %s's project too: a project has one quota, so it is one app", a.ProjectID, other)
		} else {
			projects[a.ProjectID] = a.Name
		}
		endpoint := a.Endpoint
		if endpoint == "" {
			endpoint = c.FCMEndpoint
		}
		if endpoint != "" {
			if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(key+".endpoint", "%q is not an http(s) URL like http://127.0.0.1:9099/v1", endpoint)
			}
		}
		creds := a.Credentials
		if creds == "" && endpoint == "" {
			creds = c.CredentialsFile
		}
		switch {
		case creds == "" && endpoint == "":
			bad(key+".credentials", "required for real FCM: the project's service-account JSON file (or set endpoint to use an emulator)")
		case creds != "":
			if _, err := os.Stat(creds); err != nil {
				bad(key+".credentials", "cannot read %q: %v", creds, err)
			}
		}
		if a.RateLimit < 0 {
			bad(key+".rate_limit", "must be positive (messages a second), got %v", a.RateLimit)
		}
		if a.Delivery != nil {
			validateDeliveryClass(key+".delivery.bulk", a.Delivery.Bulk, true, bad)
			validateDeliveryClass(key+".delivery.transactional", a.Delivery.Transactional, true, bad)
		}
	}
	if len(c.Apps) == 0 {
		names[model.DefaultApp] = true
	}
	check := func(kind, name, app string) {
		switch {
		case app == "" && len(names) > 1:
			bad(kind+" "+name+".app", "required when several apps are configured")
		case app != "" && !names[app]:
			bad(kind+" "+name+".app", "%q is not a configured app", app)
		}
	}
	for _, j := range c.Jobs {
		check("jobs", j.Name, j.App)
	}
}

// DefaultApp is model.DefaultApp, for the packages below the model.
const DefaultApp = model.DefaultApp
