package model

import "time"

// Category is a kind of message with its own consent (docs/consent.md):
// "advertising" needs the user's opt-in, by day and, inside its night
// window, a second one; "service" needs none beyond push_enabled. It is
// the YAML's categories entry as a broadcast runs under it, and a
// broadcast stores it whole (broadcasts.category_rules): what it was sent
// under stays provable after the configuration changes.
type Category struct {
	Name string `json:"name"`
	// Consent is who may get the category: ConsentTable (the bundled
	// user_consents table's granted flag), an SQL condition on the users
	// table u ("u.ad_agree = 1"), or "" (everyone push_enabled).
	Consent string `json:"consent,omitempty"`
	// Night is the window that needs consent of its own, nil for none.
	Night *NightRule `json:"night,omitempty"`
	// TitlePrefix and BodySuffix label every message of the category
	// ("(광고) "; how to opt out): added to every title and body,
	// localized and A/B variants included, after their templates.
	TitlePrefix string `json:"title_prefix,omitempty"`
	BodySuffix  string `json:"body_suffix,omitempty"`
	// FrequencyCap names the cap of the category's broadcasts (a
	// frequency_caps entry, "off" or "default"); "" leaves the choice to
	// the job, the audience and the deployment.
	FrequencyCap string `json:"frequency_cap,omitempty"`
	// QuietHours are the category's default quiet hours (a request's own,
	// or its false, win).
	QuietHours *QuietHours `json:"quiet_hours,omitempty"`
}

// NightRule is a daily local-time window (Start after End wraps past
// midnight) in which only users with night consent get the category; the
// others' sends wait for the window's end in their zone. Consent is
// ConsentTable (the bundled table's night flag), an SQL condition on u, or
// "" (nobody: every send in the window waits).
type NightRule struct {
	Window  QuietHours `json:"window"`
	Consent string     `json:"consent,omitempty"`
}

// ConsentTable is a Category's or a NightRule's Consent read from the
// bundled user_consents table.
const ConsentTable = "table"

// NeedsConsent reports whether the category asks for an opt-in beyond
// push_enabled.
func (c *Category) NeedsConsent() bool { return c != nil && c.Consent != "" }

// Consent is one user's answer for one category in the bundled table.
type Consent struct {
	UserID   uint64    `json:"user_id"`
	Category string    `json:"category"`
	Granted  bool      `json:"granted"`
	Night    bool      `json:"night"`
	Source   string    `json:"source,omitempty"`
	Updated  time.Time `json:"updated_at"`
	Changed  time.Time `json:"changed_at"`
}
