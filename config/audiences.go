package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Audience is a named audience from the YAML config (`audiences:`), as
// written there: package audience compiles and checks it.
type Audience struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description,omitempty"`
	// Params maps each parameter name to its type (int, string, bool,
	// date: audience.TypeInt, ...).
	Params map[string]string `yaml:"params" json:"params,omitempty"`
	SQL    string            `yaml:"sql" json:"sql"`
	// App is the app whose tokens the audience returns (docs/apps.md);
	// required when several apps are configured.
	App string `yaml:"app" json:"app,omitempty"`
	// FrequencyCap names the cap of its broadcasts (frequency_caps, off
	// or default); "" is the default.
	FrequencyCap string `yaml:"frequency_cap" json:"frequency_cap,omitempty"`
	// Category is the message category of its broadcasts (categories):
	// a broadcast to it that names none is in it, one that names another
	// is refused. "": the broadcast's own, or default_category.
	Category string `yaml:"category" json:"category,omitempty"`
}

// validateAudiences checks what the named audiences name beside their
// SQL (which package audience compiles): an app that is configured
// (required with several), a frequency_cap in frequency_caps (or off or
// default), a category in categories. Start-up and a reload check them
// alike.
func (c *Config) validateAudiences() []error {
	apps := map[string]bool{}
	for _, n := range c.AppNames() {
		apps[n] = true
	}
	cats := map[string]bool{}
	for _, cat := range c.Categories {
		cats[cat.Name] = true
	}
	var errs []error
	// The keys as start-up always named them: "audiences vip.app",
	// "audiences.vip.category".
	check := func(key string, a Audience) {
		switch appKey := strings.Replace(key, ".", " ", 1) + ".app"; {
		case a.App == "" && len(apps) > 1:
			errs = append(errs, fmt.Errorf("%s: required when several apps are configured", appKey))
		case a.App != "" && !apps[a.App]:
			errs = append(errs, fmt.Errorf("%s: %q is not a configured app", appKey, a.App))
		}
		if _, ok := c.NamedFrequencyCap(a.FrequencyCap); !ok {
			errs = append(errs, fmt.Errorf("%s.frequency_cap: %q is not in frequency_caps (nor off or default)", key, a.FrequencyCap))
		}
		if a.Category != "" && !cats[a.Category] {
			errs = append(errs, fmt.Errorf("%s.category: %q is not in categories", key, a.Category))
		}
	}
	for _, a := range c.Audiences {
		check("audiences."+a.Name, a)
	}
	for _, app := range c.Apps {
		for _, a := range app.Audiences {
			a.App = app.Name
			check("apps."+app.Name+".audiences."+a.Name, a)
		}
	}
	return errs
}

// ValidateAudiences checks what the named audiences name (their app, cap
// and category) as Load does.
func (c *Config) ValidateAudiences() error { return errors.Join(c.validateAudiences()...) }

// ReloadAudiences is c with the named audiences of its YAML file (File)
// read again, the top-level ones and each app's, unchecked
// (ValidateAudiences checks them). Nothing else of the file is taken and
// the environment is not read again: every other setting stays as it
// started. A file that no longer parses is an error, as is an app the
// file gives audiences to that c does not know (apps are read at start-up
// only).
func (c Config) ReloadAudiences() (Config, error) {
	if c.File == "" {
		return c, errors.New("PUSHFAN_CONFIG is not set: there is no file to read the audiences from")
	}
	fresh := Defaults()
	if err := loadYAML(c.File, &fresh); err != nil {
		return c, fmt.Errorf("PUSHFAN_CONFIG: %w", err)
	}
	out := c
	out.Audiences = fresh.Audiences
	out.Apps = slices.Clone(c.Apps)
	byApp := map[string][]Audience{}
	for _, a := range fresh.Apps {
		byApp[a.Name] = a.Audiences
	}
	for i := range out.Apps {
		out.Apps[i].Audiences = byApp[out.Apps[i].Name]
		delete(byApp, out.Apps[i].Name)
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(byApp)) {
		if len(byApp[name]) > 0 {
			errs = append(errs, fmt.Errorf("apps.%s.audiences: %q is not an app of this instance (apps are read at start-up only)", name, name))
		}
	}
	return out, errors.Join(errs...)
}
