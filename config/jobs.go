package config

import (
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Job is one recurring broadcast from the YAML config (PUSHFAN_CONFIG), e.g.
//
//	jobs:
//	  - name: weekly_digest
//	    schedule: "0 9 * * MON"   # robfig/cron syntax; an optional leading seconds field: "*/1 * * * * *"
//	    timezone: Asia/Seoul      # IANA zone; default UTC
//	    enabled: true             # default true
//	    catchup: 1h               # a fire missed while every instance was down runs at start-up if within this window; default 0
//	    audience: {all: true}     # or {user_ids: [...]} or {name: renewal_due, params: {days_before: 3}}
//	    message: {title: "...", body: "...", image: "...", data: {k: v}}   # strings may be text/template templates
//	                              # also android, apns, webpush, fcm_options: FCM's objects, as in the API
//	    class: bulk               # transactional or bulk; default by the audience, as for an API request
//	    max_rate: 500             # messages a second at most; default none
//	    deliver_over: 30m         # spread the sends over this long; default none
//	    analytics_label: digest   # fcm_options.analytics_label of its messages (Firebase's delivery
//	                              # data); default the category's name
//	    local_time: "09:00"       # send at this time of day in each user's zone: the next such
//	                              # time after the fire, by the job's timezone's date; default none
//	    quiet_hours: {start: "22:00", end: "08:00"}  # defer users inside it to its end; default
//	                              # PUSHFAN_QUIET_HOURS (never for a transactional job); false or
//	                              # null (~): no quiet hours, not even the default
//
// Decoding from YAML is strict: an unknown key in a job or its message is an error, as
// elsewhere in pushfan's config. catchup and deliver_over take a Go duration string ("90s",
// "1h30m") or 0.
type Job struct {
	Name     string         `yaml:"name"`
	Schedule string         `yaml:"schedule"`
	Timezone string         `yaml:"timezone"`
	Enabled  *bool          `yaml:"enabled"`
	Catchup  time.Duration  `yaml:"catchup"`
	Audience map[string]any `yaml:"audience"` // passed through as JSON to the API layer, which validates it
	Message  JobMessage     `yaml:"message"`
	// Class and pacing, validated as an API request's are.
	Class       string        `yaml:"class"`
	MaxRate     float64       `yaml:"max_rate"`
	DeliverOver time.Duration `yaml:"deliver_over"`
	// LocalTime and QuietHours, validated as an API request's
	// send_at_local and quiet_hours are. NoQuietHours is quiet_hours:
	// false or null, which switches the deployment's default off as a
	// request's does; QuietHours is then nil.
	LocalTime    string         `yaml:"local_time"`
	QuietHours   *JobQuietHours `yaml:"quiet_hours"`
	NoQuietHours bool           `yaml:"-"`
	// FrequencyCap names the cap of its broadcasts (frequency_caps, off
	// or default); "" is the default.
	FrequencyCap string `yaml:"frequency_cap"`
	// Category is the message category of its broadcasts (categories);
	// "": the audience's, or default_category.
	Category string `yaml:"category"`
	// App is the app the job's broadcasts send for; required when several
	// apps are configured.
	App string `yaml:"app"`
	// AnalyticsLabel is its messages' fcm_options.analytics_label, one per
	// job, not per fire (Firebase reports 100 labels a day); "": the category's.
	AnalyticsLabel string `yaml:"analytics_label"`
}

// JobQuietHours is a job's quiet window, "HH:MM" times of day.
type JobQuietHours struct {
	Start string `yaml:"start"`
	End   string `yaml:"end"`
}

// JobMessage is the notification a job sends. Title, body and data values may be text/template
// templates over the audience's extra columns; the API layer parses and renders them.
type JobMessage struct {
	Title string            `yaml:"title"`
	Body  string            `yaml:"body"`
	Image string            `yaml:"image"`
	Data  map[string]string `yaml:"data"`
	// Localized are per-language title and body by language tag, as in
	// the API's "localized".
	Localized map[string]JobLocalized `yaml:"localized"`
	// FCM's platform overrides, as in the API (the REST API's JSON shape,
	// snake_case keys); the API layer validates them.
	Android    map[string]any `yaml:"android"`
	APNS       map[string]any `yaml:"apns"`
	Webpush    map[string]any `yaml:"webpush"`
	FCMOptions map[string]any `yaml:"fcm_options"`
}

// JobLocalized is one language's title and body.
type JobLocalized struct {
	Title string `yaml:"title"`
	Body  string `yaml:"body"`
}

// UnmarshalYAML decodes a variant strictly: an unknown key is an error.
func (l *JobLocalized) UnmarshalYAML(node *yaml.Node) error {
	if err := checkKeys(node, "cron job message localized variant", []string{"title", "body"}); err != nil {
		return err
	}
	type plain JobLocalized
	var p plain
	if err := node.Decode(&p); err != nil {
		return err
	}
	*l = JobLocalized(p)
	return nil
}

var (
	jobKeys     = []string{"name", "schedule", "timezone", "enabled", "catchup", "audience", "message", "class", "max_rate", "deliver_over", "local_time", "quiet_hours", "frequency_cap", "app", "category", "analytics_label"}
	messageKeys = []string{"title", "body", "image", "data", "localized", "android", "apns", "webpush", "fcm_options"}
	quietKeys   = []string{"start", "end"}
)

// UnmarshalYAML decodes a job strictly (unknown keys are errors, since a custom unmarshaler
// does not inherit the outer decoder's KnownFields) and parses catchup as a duration.
func (j *Job) UnmarshalYAML(node *yaml.Node) error {
	if err := checkKeys(node, "cron job", jobKeys); err != nil {
		return err
	}
	var raw struct {
		Name     string         `yaml:"name"`
		Schedule string         `yaml:"schedule"`
		Timezone string         `yaml:"timezone"`
		Enabled  *bool          `yaml:"enabled"`
		Catchup  yaml.Node      `yaml:"catchup"`
		Audience map[string]any `yaml:"audience"`
		Message  JobMessage     `yaml:"message"`
		Class    string         `yaml:"class"`
		MaxRate  float64        `yaml:"max_rate"`
		Over     yaml.Node      `yaml:"deliver_over"`
		Local    string         `yaml:"local_time"`
		Cap      string         `yaml:"frequency_cap"`
		App      string         `yaml:"app"`
		Category string         `yaml:"category"`
		Quiet    yaml.Node      `yaml:"quiet_hours"`
		Label    string         `yaml:"analytics_label"`
	}
	if err := node.Decode(&raw); err != nil {
		return err
	}
	catchup, err := decodeDuration(&raw.Catchup)
	if err != nil {
		return fmt.Errorf("cron job %q: catchup: %w", raw.Name, err)
	}
	over, err := decodeDuration(&raw.Over)
	if err != nil {
		return fmt.Errorf("cron job %q: deliver_over: %w", raw.Name, err)
	}
	quiet, noQuiet, err := decodeQuietHours(&raw.Quiet)
	if err != nil {
		return fmt.Errorf("cron job %q: quiet_hours: %w", raw.Name, err)
	}
	*j = Job{
		Name:     raw.Name,
		Schedule: raw.Schedule,
		Timezone: raw.Timezone,
		Enabled:  raw.Enabled,
		Catchup:  catchup,
		Audience: raw.Audience,
		Message:  raw.Message,

		Class:          raw.Class,
		MaxRate:        raw.MaxRate,
		DeliverOver:    over,
		LocalTime:      raw.Local,
		QuietHours:     quiet,
		NoQuietHours:   noQuiet,
		FrequencyCap:   raw.Cap,
		App:            raw.App,
		Category:       raw.Category,
		AnalyticsLabel: raw.Label,
	}
	return nil
}

// UnmarshalYAML decodes a message strictly: an unknown key is an error.
func (m *JobMessage) UnmarshalYAML(node *yaml.Node) error {
	if err := checkKeys(node, "cron job message", messageKeys); err != nil {
		return err
	}
	type plain JobMessage // no methods: avoids recursing into this unmarshaler
	var p plain
	if err := node.Decode(&p); err != nil {
		return err
	}
	*m = JobMessage(p)
	return nil
}

// checkKeys rejects a mapping key outside allowed; a null node is accepted (it decodes to zero).
func checkKeys(node *yaml.Node, what string, allowed []string) error {
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return nil
	}
	if node.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s must be a mapping", node.Line, what)
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k := node.Content[i]
		known := false
		for _, a := range allowed {
			if k.Value == a {
				known = true
				break
			}
		}
		if !known {
			return fmt.Errorf("line %d: unknown key %q in %s (known: %s)", k.Line, k.Value, what, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// decodeQuietHours reads a job's quiet_hours: absent (nil, false: the
// default applies), a mapping {start, end}, or false or null (off: no
// quiet hours, not even the default), as the API reads a request's. A
// bare "quiet_hours:" is null in YAML, so it is off too.
func decodeQuietHours(n *yaml.Node) (window *JobQuietHours, off bool, err error) {
	switch {
	case n.Kind == 0:
		return nil, false, nil
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return nil, true, nil
	case n.Kind == yaml.ScalarNode && n.Tag == "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, false, err
		}
		if b {
			return nil, false, fmt.Errorf("line %d: true is not a window: want {start: \"22:00\", end: \"08:00\"}, or false or null for none", n.Line)
		}
		return nil, true, nil
	case n.Kind != yaml.MappingNode:
		return nil, false, fmt.Errorf("line %d: want {start: \"22:00\", end: \"08:00\"}, or false or null for none", n.Line)
	}
	if err := checkKeys(n, "cron job quiet_hours", quietKeys); err != nil {
		return nil, false, err
	}
	var w JobQuietHours
	if err := n.Decode(&w); err != nil {
		return nil, false, err
	}
	return &w, false, nil
}

// decodeDuration accepts an absent or null value (0), the integer 0, or a Go duration string.
// Any other bare number is refused: "catchup: 3600" does not say whether it means seconds.
func decodeDuration(n *yaml.Node) (time.Duration, error) {
	if n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return 0, nil
	}
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("line %d: want a duration such as \"1h\"", n.Line)
	}
	if n.Tag == "!!int" && (n.Value == "0" || n.Value == "-0" || n.Value == "+0") {
		return 0, nil
	}
	if n.Tag == "!!str" {
		d, err := time.ParseDuration(n.Value)
		if err == nil {
			return d, nil
		}
	}
	return 0, fmt.Errorf("line %d: %q is not a duration: want a number with a unit, such as \"90s\" or \"1h\"", n.Line, n.Value)
}
