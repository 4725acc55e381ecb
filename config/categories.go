package config

import (
	"fmt"
	"regexp"
	"strings"

	"pushfan/model"
)

// Category is a message category from the YAML config (`categories:`), as
// written there (docs/consent.md). Model turns it into the rules a
// broadcast runs under.
type Category struct {
	Name string `yaml:"name"`
	// Consent is "table" (the bundled user_consents table), an SQL
	// condition on the users table u, or empty (no opt-in beyond
	// push_enabled).
	Consent string         `yaml:"consent"`
	Night   *CategoryNight `yaml:"night"`
	// TitlePrefix and BodySuffix label every message of the category.
	TitlePrefix string `yaml:"title_prefix"`
	BodySuffix  string `yaml:"body_suffix"`
	// FrequencyCap names a frequency_caps entry (or off, default).
	FrequencyCap string `yaml:"frequency_cap"`
	// QuietHours is the category's default window, "HH:MM-HH:MM".
	QuietHours string `yaml:"quiet_hours"`
}

// CategoryNight is a category's night window and who may be sent to
// inside it: consent "table" (the bundled table's night flag), an SQL
// condition on u, or empty (nobody: every send in it waits).
type CategoryNight struct {
	Window  string `yaml:"window"`
	Consent string `yaml:"consent"`
}

// categoryName is what a category name may be: it is written into SQL
// as a literal (the bundled table's category = 'name'), so nothing that
// needs quoting.
var categoryName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// CategoryName reports whether name may name a category.
func CategoryName(name string) bool { return categoryName.MatchString(name) }

// Model is the category as broadcasts run under it; c must have passed
// validateCategories.
func (c Category) Model() model.Category {
	m := model.Category{
		Name: c.Name, Consent: strings.TrimSpace(c.Consent),
		TitlePrefix: c.TitlePrefix, BodySuffix: c.BodySuffix, FrequencyCap: c.FrequencyCap,
	}
	if c.Night != nil {
		start, end, _ := ParseQuietHours(c.Night.Window)
		m.Night = &model.NightRule{Window: model.QuietHours{Start: start, End: end}, Consent: strings.TrimSpace(c.Night.Consent)}
	}
	if c.QuietHours != "" {
		start, end, _ := ParseQuietHours(c.QuietHours)
		m.QuietHours = &model.QuietHours{Start: start, End: end}
	}
	return m
}

// CategoryList is the configured categories as broadcasts run under them,
// in configuration order.
func (c *Config) CategoryList() []model.Category {
	out := make([]model.Category, len(c.Categories))
	for i, cat := range c.Categories {
		out[i] = cat.Model()
	}
	return out
}

// maxLabelBytes bounds a title prefix or body suffix: it is added to
// every message, inside FCM's 4 KB payload.
const maxLabelBytes = 256

// validateCategories checks every category: a unique name fit for SQL, a
// consent that is "table", empty or a condition (checked against the
// database at start-up with the schema), a night window and labels that
// can be applied, a cap that exists; and that default_category names one.
// Each problem names its key.
func validateCategories(c *Config) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("categories."+key+": "+format, args...))
	}
	seen := map[string]bool{}
	for i, cat := range c.Categories {
		key := cat.Name
		if !CategoryName(cat.Name) {
			key = fmt.Sprint(i)
			bad(key+".name", "%q must be 1 to 32 lower-case letters, digits, _ or -, starting with a letter", cat.Name)
		} else if seen[cat.Name] {
			bad(key+".name", "%q is configured twice", cat.Name)
		}
		seen[cat.Name] = true
		if err := checkConsentRule(cat.Consent); err != nil {
			bad(key+".consent", "%v", err)
		}
		if n := cat.Night; n != nil {
			if strings.TrimSpace(n.Window) == "" {
				bad(key+".night.window", "required: the local-time window, e.g. 21:00-08:00")
			} else if _, _, err := ParseQuietHours(n.Window); err != nil {
				bad(key+".night.window", "%v", err)
			}
			if err := checkConsentRule(n.Consent); err != nil {
				bad(key+".night.consent", "%v", err)
			}
			switch nc := strings.TrimSpace(n.Consent); {
			case strings.TrimSpace(cat.Consent) == "" && nc != "":
				bad(key+".night.consent", "needs consent: night consent is a second opt-in on top of the category's own")
			case nc == model.ConsentTable && strings.TrimSpace(cat.Consent) != model.ConsentTable:
				// The table's night flag is recorded with its granted flag
				// (PUT /push/users/{id}/consents/{category}), which a category
				// whose day consent is the app's own column never records.
				bad(key+".night.consent", "table needs consent: table too (the bundled table records night consent beside the day consent)")
			}
		}
		for field, label := range map[string]string{"title_prefix": cat.TitlePrefix, "body_suffix": cat.BodySuffix} {
			switch {
			case len(label) > maxLabelBytes:
				bad(key+"."+field, "is %d bytes; at most %d (it is added to every message)", len(label), maxLabelBytes)
			case strings.Contains(label, "{{"):
				bad(key+"."+field, "may not contain {{: the label is added after the message's templates and is sent as written")
			}
		}
		if cat.QuietHours != "" {
			if _, _, err := ParseQuietHours(cat.QuietHours); err != nil {
				bad(key+".quiet_hours", "%v", err)
			}
		}
		if _, ok := c.NamedFrequencyCap(cat.FrequencyCap); !ok {
			bad(key+".frequency_cap", "%q is not in frequency_caps (nor off or default)", cat.FrequencyCap)
		}
	}
	switch {
	case c.DefaultCategory == "":
	case len(c.Categories) == 0:
		errs = append(errs, fmt.Errorf("default_category: %q names no category (categories is empty)", c.DefaultCategory))
	case !seen[c.DefaultCategory]:
		errs = append(errs, fmt.Errorf("default_category: %q is not in categories", c.DefaultCategory))
	}
	for _, j := range c.Jobs {
		if j.Category != "" && !seen[j.Category] {
			errs = append(errs, fmt.Errorf("jobs.%s.category: %q is not in categories", j.Name, j.Category))
		}
	}
	return errs
}

// checkConsentRule checks a consent as far as it can be without the
// database: "table", empty, or one SQL condition (no statement separator,
// no comment that could hide the rest of the query it is put into).
func checkConsentRule(rule string) error {
	r := strings.TrimSpace(rule)
	switch {
	case r == "" || r == model.ConsentTable:
		return nil
	case strings.Contains(r, ";"):
		return fmt.Errorf("%q: one SQL condition on the users table u, without ;", rule)
	case strings.Contains(r, "--") || strings.Contains(r, "/*") || strings.Contains(r, "#"):
		return fmt.Errorf("%q: no comments in a consent condition", rule)
	}
	return nil
}
