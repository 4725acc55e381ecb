package rules

import (
	"encoding/json"
	"time"

	"pushfan/audience"
	"pushfan/broadcast/message"
	"pushfan/model"
)

// FieldError is a request rule that a Spec breaks (message.FieldError):
// the HTTP layer answers it with a 400 naming the field.
type FieldError = message.FieldError

// MaxPayloadBytes is FCM's limit on a message's payload (see message).
const MaxPayloadBytes = message.MaxPayloadBytes

func fieldError(code, field, format string, args ...any) *FieldError {
	return message.FieldErrorf(code, field, format, args...)
}

// Spec is a broadcast as a request body or a cron job describes it, before
// the request rules have checked it. Its JSON is the API's.
type Spec struct {
	Title              string            `json:"title"`
	Body               string            `json:"body"`
	Image              string            `json:"image"`
	Data               map[string]string `json:"data"`
	Audience           *AudienceSpec     `json:"audience"`
	DryRun             bool              `json:"dry_run"`
	SendAt             string            `json:"send_at"`
	InvalidateOnDryRun bool              `json:"invalidate_on_dry_run"`
	// Track: false sends without the event token (data["pushfan"]).
	Track *bool `json:"track"`
	// Variants are A/B variants (abtest.go): 2 to 5 full messages with
	// weights, instead of the message fields above.
	Variants []VariantSpec `json:"variants"`
	// LinkDataKey names the data key that holds the message's link: with
	// tracking and PUSHFAN_PUBLIC_URL, it is sent through the click
	// redirect, as webpush.fcm_options.link is.
	LinkDataKey string `json:"link_data_key"`
	// Class is the scheduling class, "transactional" or "bulk" (see
	// model.ClassTransactional); empty picks by the audience.
	Class string `json:"class"`
	// MaxRate caps the broadcast at this many messages a second.
	MaxRate *float64 `json:"max_rate"`
	// DeliverOver spreads the sends evenly over this Go duration ("30m").
	DeliverOver string `json:"deliver_over"`
	// Localized are per-language title and body by language tag; each
	// target gets its user's (see localeMatcher), else Title and Body.
	Localized map[string]model.Localized `json:"localized"`
	// FCM's platform overrides, in the REST API's JSON shape (overrides.go).
	Android    json.RawMessage `json:"android"`
	APNS       json.RawMessage `json:"apns"`
	Webpush    json.RawMessage `json:"webpush"`
	FCMOptions json.RawMessage `json:"fcm_options"`
	// AnalyticsLabel is fcm_options.analytics_label of every message,
	// Firebase's key to its delivery data (analytics.go).
	AnalyticsLabel string `json:"analytics_label"`
	// Hold stores the broadcast held: nothing is sent until it is
	// released (POST /push/broadcasts/{id}/release).
	Hold bool `json:"hold"`
	// SendAtLocal is a wall-clock time with no offset, delivered at that
	// time in each user's zone; QuietHours defers targets whose local time
	// is inside the window to its end (localtime.go), or, false or null,
	// switches the deployment's default off (quiethours.go).
	SendAtLocal string         `json:"send_at_local"`
	QuietHours  QuietHoursSpec `json:"quiet_hours"`
	// FrequencyCap false sends past the frequency caps; true caps even a
	// transactional broadcast (caps.go).
	FrequencyCap *bool `json:"frequency_cap"`
	// App names the app (Firebase project) the broadcast sends for;
	// required when several apps are configured (docs/apps.md).
	App string `json:"app"`
	// Category is the message category (docs/consent.md): its consent,
	// night rule, labels, cap and quiet hours (category.go).
	Category string `json:"category"`
	// job names the cron job a spec fires for (its cap).
	job string
}

// AudienceSpec says who a Spec is for: exactly one of all, user_ids, or a
// named audience with its parameters.
type AudienceSpec struct {
	All     bool           `json:"all"`
	UserIDs []uint64       `json:"user_ids"`
	Name    string         `json:"name"`
	Params  map[string]any `json:"params"`
	// Segment names a saved segment (package segment): its current
	// version is resolved by the submit, which has the database.
	Segment string `json:"segment"`
}

// Rules are the request rules a Spec must keep before anything is stored
// or sent. Every entry point (the API, cron jobs) goes through them.
type Rules struct {
	MaxUserIDs int           // cap on audience.user_ids
	Horizon    time.Duration // how far ahead send_at may be
	// Named holds the named audiences, checked against the database, with
	// their apps, caps and categories: read at the moment of use, so a
	// reload (audience.Catalog.Swap) takes effect at once (audience.go).
	Named *audience.Catalog
	// RateLimit is the project's budget (messages a second), which a
	// broadcast's pacing must fit in.
	RateLimit float64
	// Tracking: the deployment's messages carry event tokens
	// (PUSHFAN_TRACKING), which count against the payload limit, as do the
	// click URLs that replace their links under PublicURL.
	Tracking  bool
	PublicURL string
	// TransactionalUsers: a user_ids audience this small is transactional
	// unless the request names a class.
	TransactionalUsers int
	// DefaultZone is the zone of users without one (PUSHFAN_DEFAULT_TIMEZONE;
	// nil: UTC); QuietHours the deployment's default quiet hours
	// (PUSHFAN_QUIET_HOURS; nil: none), which no transactional broadcast
	// gets (Rules.local).
	DefaultZone *time.Location
	QuietHours  *model.QuietHours
	// Caps are the frequency caps (caps.go).
	Caps CapRules
	// Categories are the message categories (category.go).
	Categories CategoryRules
	// Apps are the configured apps with their budgets (messages a second)
	// (apps.go).
	Apps map[string]float64
}

// Validate turns spec into a Request, or a *FieldError naming the broken
// rule. now is the clock for send_at; a zero now refuses send_at (a cron
// fire is never scheduled further).
func (r Rules) Validate(spec Spec, now time.Time) (Request, error) {
	r = r.pinned()
	var out Request
	var plat message.Overrides
	var tagBytes int
	cat, err := r.category(spec)
	if err != nil {
		return out, err
	}
	// The labels are part of the message from here on: every rule below
	// (templates, FCM's payload limit) sees the message as it is sent.
	if spec, err = labeled(spec, cat); err != nil {
		return out, err
	}
	if spec, err = withAnalyticsLabel(spec, cat); err != nil {
		return out, err
	}
	if cat != nil && cat.QuietHours != nil && spec.QuietHours.Window == nil && !spec.QuietHours.Off {
		q := *cat.QuietHours
		spec.QuietHours.Window = &q // the category's default, before the deployment's
	}
	if len(spec.Variants) > 0 {
		err = checkVariantsOnly(spec)
	} else {
		plat, tagBytes, err = r.checkMessage(spec, r.tracked(spec))
	}
	if err != nil {
		return out, err
	}
	app, err := r.app(spec.App)
	if err != nil {
		return out, err
	}
	r.RateLimit = r.BudgetOf(app)
	a, vars, err := r.Audience(spec.Audience)
	if err != nil {
		return out, err
	}
	if err := r.AudienceApp(a, app); err != nil {
		return out, err
	}
	var msg model.Message
	if len(spec.Variants) > 0 {
		msg, err = r.abMessage(spec, r.tracked(spec))
	} else {
		msg, err = r.checkTemplates(spec, plat, vars, tagBytes)
	}
	if err != nil {
		return out, err
	}
	if spec.InvalidateOnDryRun && !spec.DryRun {
		return out, fieldError("invalid_value", "invalidate_on_dry_run", "invalidate_on_dry_run only applies with dry_run: true (a real send always invalidates dead tokens)")
	}
	sendAt, err := r.sendAt(spec.SendAt, now)
	if err != nil {
		return out, err
	}
	p, err := r.pacing(spec, a)
	if err != nil {
		return out, err
	}
	if a.Local, err = r.local(spec, p.class, now); err != nil {
		return out, err
	}
	if cat != nil && cat.Night != nil {
		if a.Local == nil {
			a.Local = &model.LocalDelivery{}
		}
		w := cat.Night.Window
		a.Local.Night = &w
	}
	return Request{
		Submission: model.Submission{
			App:                app,
			Class:              p.class,
			MaxRate:            p.maxRate,
			DeliverOver:        p.deliverOver,
			SendAt:             sendAt,
			Message:            msg,
			Audience:           a,
			DryRun:             spec.DryRun,
			InvalidateOnDryRun: spec.InvalidateOnDryRun,
			FrequencyCap:       r.frequencyCap(spec, a, p.class),
			Category:           cat,
		},
		Hold: spec.Hold,
	}, nil
}

func (r Rules) sendAt(raw string, now time.Time) (*time.Time, error) {
	if raw == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return nil, fieldError("invalid_value", "send_at", "send_at must be an RFC 3339 time with an offset, e.g. 2026-12-01T18:00:00+09:00")
	}
	switch {
	case now.IsZero():
		return nil, fieldError("invalid_value", "send_at", "send_at is not accepted here")
	case !t.After(now):
		return nil, fieldError("send_at_in_past", "send_at", "send_at %s is not in the future (now is %s)", t.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case t.Sub(now) > r.Horizon:
		return nil, fieldError("send_at_too_far", "send_at", "send_at is more than %v ahead; the limit is PUSHFAN_SCHEDULE_HORIZON", r.Horizon)
	}
	u := t.UTC()
	return &u, nil
}
