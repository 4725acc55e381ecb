package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

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
}

// Rules are the request rules a Spec must keep before anything is stored
// or sent. Every entry point (the API, cron jobs) goes through them.
type Rules struct {
	MaxUserIDs int           // cap on audience.user_ids
	Horizon    time.Duration // how far ahead send_at may be
	// Audiences are the named audiences, checked against the database.
	Audiences map[string]*audience.Audience
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
	// Apps are the configured apps with their budgets (messages a second),
	// and AudienceApps the app of each named audience (apps.go).
	Apps         map[string]float64
	AudienceApps map[string]string
}

// MaxDeliverOver bounds deliver_over: a broadcast spread wider than a week
// is a schedule, not a pace.
const MaxDeliverOver = 7 * 24 * time.Hour

// Validate turns spec into a Request, or a *FieldError naming the broken
// rule. now is the clock for send_at; a zero now refuses send_at (a cron
// fire is never scheduled further).
func (r Rules) Validate(spec Spec, now time.Time) (Request, error) {
	var out Request
	var plat message.Overrides
	var tagBytes int
	var err error
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
	return Request{
		App:                app,
		Class:              p.class,
		MaxRate:            p.maxRate,
		DeliverOver:        p.deliverOver,
		SendAt:             sendAt,
		Message:            msg,
		Audience:           a,
		DryRun:             spec.DryRun,
		InvalidateOnDryRun: spec.InvalidateOnDryRun,
		Hold:               spec.Hold,
		FrequencyCap:       r.frequencyCap(spec, a, p.class),
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

// Class is the scheduling class a broadcast of spec (its class and pace)
// to audience a gets, or the *FieldError of a class or pace the rules
// refuse.
func (r Rules) Class(spec Spec, a model.Audience) (string, error) {
	p, err := r.pacing(spec, a)
	return p.class, err
}

type pacing struct {
	class       string
	maxRate     float64
	deliverOver time.Duration
}

// pacing checks the class and the pace against the budget. A user_ids
// audience is counted already, so a pace it cannot keep is refused here;
// for the others the broadcast goes as fast as the budget allows and its
// expected finish says when.
func (r Rules) pacing(spec Spec, a model.Audience) (pacing, error) {
	var p pacing
	if spec.MaxRate != nil {
		switch v := *spec.MaxRate; {
		case math.IsNaN(v) || v <= 0:
			return p, fieldError("invalid_value", "max_rate", "max_rate must be a positive number of messages a second, got %v", v)
		case v > r.RateLimit:
			return p, fieldError("max_rate_over_budget", "max_rate", "max_rate %v is over the project's budget of %v messages a second (PUSHFAN_RATE_LIMIT, shared by every instance)", v, r.RateLimit)
		}
		p.maxRate = *spec.MaxRate
	}
	if spec.DeliverOver != "" {
		d, err := time.ParseDuration(spec.DeliverOver)
		switch {
		case err != nil:
			return p, fieldError("invalid_value", "deliver_over", "deliver_over must be a duration such as \"30m\" or \"2h\", got %q", spec.DeliverOver)
		case d < time.Second || d > MaxDeliverOver:
			return p, fieldError("invalid_value", "deliver_over", "deliver_over must be between 1s and %v, got %v", MaxDeliverOver, d)
		}
		p.deliverOver = d
	}
	if n := len(a.UserIDs); n > 0 {
		// At least one token a user: a lower bound on the sends.
		if p.deliverOver > 0 && float64(n)/p.deliverOver.Seconds() > r.RateLimit {
			return p, fieldError("deliver_over_too_short", "deliver_over", "%d users cannot be reached in %v within the budget of %v messages a second", n, p.deliverOver, r.RateLimit)
		}
		if p.deliverOver > 0 && p.maxRate > 0 && float64(n) > p.maxRate*p.deliverOver.Seconds() {
			return p, fieldError("deliver_over_too_short", "deliver_over", "%d users cannot be reached in %v at max_rate %v", n, p.deliverOver, p.maxRate)
		}
	}
	paced := p.maxRate > 0 || p.deliverOver > 0
	switch spec.Class {
	case "":
		p.class = model.ClassBulk
		if n := len(a.UserIDs); n > 0 && n <= r.TransactionalUsers && !paced {
			p.class = model.ClassTransactional
		}
	case model.ClassTransactional:
		if paced {
			return p, fieldError("invalid_value", "class", "a transactional broadcast goes first and as fast as it can: it cannot be paced (drop max_rate and deliver_over, or use class bulk)")
		}
		p.class = spec.Class
	case model.ClassBulk:
		p.class = spec.Class
	default:
		return p, fieldError("invalid_value", "class", "class must be %q or %q, got %q (the scheduling class, not FCM's message priority)", model.ClassTransactional, model.ClassBulk, spec.Class)
	}
	return p, nil
}

// Audience validates a request's audience and returns it as stored, with
// the template variables its rows carry (none for the built-in audiences).
func (r Rules) Audience(a *AudienceSpec) (model.Audience, []string, error) {
	none := []string{}
	set := 0
	if a != nil {
		for _, b := range []bool{a.All, len(a.UserIDs) > 0, a.Name != ""} {
			if b {
				set++
			}
		}
	}
	switch {
	case a == nil:
		return model.Audience{}, nil, fieldError("missing_field", "audience", `audience is required: {"all": true}, {"user_ids": [...]} or {"name": "...", "params": {...}}`)
	case set > 1:
		return model.Audience{}, nil, fieldError("invalid_value", "audience", "audience must set exactly one of all, user_ids or name")
	case a.Params != nil && a.Name == "":
		return model.Audience{}, nil, fieldError("invalid_value", "audience.params", "params only apply to a named audience")
	case a.Name != "":
		return r.named(a)
	case a.All:
		return model.Audience{All: true}, none, nil
	case len(a.UserIDs) == 0:
		return model.Audience{}, nil, fieldError("empty_audience", "audience", `the audience is empty: set {"all": true} or a non-empty user_ids list`)
	case len(a.UserIDs) > r.MaxUserIDs:
		return model.Audience{}, nil, fieldError("too_many_user_ids", "audience.user_ids", "audience.user_ids has %d ids; at most %d are allowed per broadcast", len(a.UserIDs), r.MaxUserIDs)
	}
	seen := make(map[uint64]struct{}, len(a.UserIDs))
	ids := make([]uint64, 0, len(a.UserIDs))
	for _, id := range a.UserIDs {
		if id == 0 {
			return model.Audience{}, nil, fieldError("invalid_value", "audience.user_ids", "user ids must be positive integers; got 0")
		}
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			ids = append(ids, id)
		}
	}
	return model.Audience{UserIDs: ids}, none, nil
}

// named binds a named audience's parameters (typed, never interpolated
// into SQL).
func (r Rules) named(a *AudienceSpec) (model.Audience, []string, error) {
	na, ok := r.Audiences[a.Name]
	if !ok {
		return model.Audience{}, nil, fieldError("unknown_audience", "audience.name", "no audience named %q is configured (GET /push/audiences lists them)", a.Name)
	}
	bound, err := na.Bind(a.Params)
	if err != nil {
		var pe *audience.ParamError
		if errors.As(err, &pe) {
			field := "audience.params"
			if ps := pe.Params(); len(ps) == 1 {
				field += "." + ps[0]
			}
			return model.Audience{}, nil, fieldError("invalid_params", field, "%v", err)
		}
		return model.Audience{}, nil, fieldError("invalid_params", "audience.params", "%v", err)
	}
	raw, err := bound.ParamsJSON()
	if err != nil {
		return model.Audience{}, nil, fieldError("invalid_params", "audience.params", "%v", err)
	}
	vars := na.Vars()
	if vars == nil {
		vars = []string{}
	}
	return model.Audience{Name: a.Name, Params: raw}, vars, nil
}

// Bind looks a stored broadcast's named audience up and binds its
// parameters (the planner and the runs page it; a held one is counted).
func (r Rules) Bind(a model.Audience) (audience.Bound, error) {
	named, ok := r.Audiences[a.Name]
	if !ok {
		return audience.Bound{}, fmt.Errorf("named audience %q is not configured on this instance", a.Name)
	}
	return named.BindJSON(a.Params)
}

// untrack keeps "track" only when it says false: a message is tracked by
// default, and leaving true out keeps the request hashes of older keys.
func untrack(track *bool) *bool {
	if track == nil || *track {
		return nil
	}
	return track
}

// checkLinkKey checks link_data_key: a data key whose value is an http(s)
// link.
func checkLinkKey(spec Spec) error {
	if spec.LinkDataKey == "" {
		return nil
	}
	v, ok := spec.Data[spec.LinkDataKey]
	if !ok {
		return fieldError("invalid_value", "link_data_key", "link_data_key %q names no key of data", spec.LinkDataKey)
	}
	if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fieldError("invalid_value", "data."+spec.LinkDataKey, "data.%s is named by link_data_key, so it must be an http(s) URL", spec.LinkDataKey)
	}
	return nil
}

// tracked: spec's messages carry the event token.
func (r Rules) tracked(spec Spec) bool { return r.Tracking && (spec.Track == nil || *spec.Track) }

// checkMessage checks spec's message before its audience is known: text,
// image, data keys, overrides, link key and FCM's payload limit (with the
// event token when tracked).
func (r Rules) checkMessage(spec Spec, tracked bool) (message.Overrides, int, error) {
	var plat message.Overrides
	if spec.Title == "" && spec.Body == "" && len(spec.Data) == 0 {
		return plat, 0, fieldError("empty_message", "", "the message is empty: set at least one of title, body or data")
	}
	for _, f := range []struct{ name, v string }{{"title", spec.Title}, {"body", spec.Body}, {"image", spec.Image}} {
		if !utf8.ValidString(f.v) {
			return plat, 0, fieldError("invalid_value", f.name, "%s is not valid UTF-8", f.name)
		}
	}
	// U+0001 marks where each send's event token goes (fanout.TagPlaceholder):
	// no message may hold it.
	for _, f := range []struct{ name, v string }{{"title", spec.Title}, {"body", spec.Body}, {"image", spec.Image}} {
		if strings.ContainsRune(f.v, '\x01') {
			return plat, 0, fieldError("invalid_value", f.name, "%s holds the control character U+0001", f.name)
		}
	}
	for k, v := range spec.Data {
		if strings.ContainsRune(k, '\x01') || strings.ContainsRune(v, '\x01') {
			return plat, 0, fieldError("invalid_value", "data."+k, "data.%s holds the control character U+0001", k)
		}
	}
	if spec.Image != "" {
		u, err := url.Parse(spec.Image)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return plat, 0, fieldError("invalid_value", "image", "image must be an http(s) URL")
		}
	}
	for k := range spec.Data {
		if err := message.CheckDataKey(k); err != nil {
			return plat, 0, err
		}
	}
	plat, err := message.ParseOverrides(spec.Android, spec.APNS, spec.Webpush, spec.FCMOptions)
	if err != nil {
		return plat, 0, err
	}
	if err := checkLinkKey(spec); err != nil {
		return plat, 0, err
	}
	tagBytes := 0
	if tracked {
		tagBytes = message.TagBytes + r.linkGrowth(spec)
	}
	if n := message.PayloadSize(spec.Title, spec.Body, spec.Image, spec.Data) + plat.Size() + tagBytes; n > MaxPayloadBytes {
		return plat, 0, fieldError("payload_too_large", "", "the message payload is %d bytes; FCM allows at most %d (title, body, image, data, the event token and the android, apns, webpush and fcm_options objects with pushfan's collapse keys, together)", n, MaxPayloadBytes)
	}
	return plat, tagBytes, nil
}

// checkTemplates checks spec's message against its audience's vars (its
// templates, its localized variants) and returns it as stored.
func (r Rules) checkTemplates(spec Spec, plat message.Overrides, vars []string, tagBytes int) (model.Message, error) {
	if _, err := audience.ParseTemplate(spec.Title, spec.Body, spec.Data, vars); err != nil {
		var te *audience.TemplateError
		if errors.As(err, &te) {
			return model.Message{}, fieldError("template_error", te.Field, "%v", err)
		}
		return model.Message{}, fieldError("template_error", "", "%v", err)
	}
	if err := message.ValidateLocalized(spec.Localized, spec.Image, spec.Data, vars, plat.Size()+tagBytes); err != nil {
		return model.Message{}, err
	}
	if err := plat.CheckTemplates(vars); err != nil {
		return model.Message{}, err
	}
	return plat.Apply(model.Message{Title: spec.Title, Body: spec.Body, Image: spec.Image, Data: spec.Data, Localized: spec.Localized, Track: untrack(spec.Track), LinkKey: spec.LinkDataKey})
}

// linkGrowth bounds what the click redirect adds to spec's payload: each
// link sent through it becomes PublicURL/v1/c/{token}[/d].
func (r Rules) linkGrowth(spec Spec) int {
	if r.PublicURL == "" {
		return 0
	}
	click := len(r.PublicURL) + len("/v1/c/") + message.TagBytes + len(message.DataLinkSuffix)
	grow := 0
	if spec.LinkDataKey != "" {
		grow += max(click-len(spec.Data[spec.LinkDataKey]), 0)
	}
	if len(spec.Webpush) > 0 {
		grow += click // at most the whole click URL: the link it replaces is counted already
	}
	return grow
}
