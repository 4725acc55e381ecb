package message

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
)

// FCM's platform overrides: the android, apns, webpush and fcm_options
// objects of an HTTP v1 message, in the REST API's JSON shape
// (https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages),
// so that an operator can paste them from Firebase's documentation.
//
// pushfan accepts exactly the fields the firebase Go SDK (v4.19) can carry,
// because both of its clients send what the SDK's types encode: a field
// the SDK would drop silently is refused here instead, naming its path.
// Values are normalized to the SDK's own spelling (priority "HIGH" is sent
// as "high", ttl "1.5s" as "1.500000000s"), and what is stored with the
// broadcast is what FCM receives, before pushfan's delivery defaults
// (fanout.Delivery).

// maxTTL is FCM's longest time to live: 28 days.
const maxTTL = 28 * 24 * time.Hour

// overrideNames are the four objects, in the order they are measured.
var overrideNames = [4]string{"android", "apns", "webpush", "fcm_options"}

// override is one normalized object and its string values that may be
// templates.
type override struct {
	tree   map[string]any // nil when absent
	leaves []leaf
}

// platformRules returns the rule of each object, in overrideNames order.
func platformRules() [4]rule {
	return [4]rule{androidRule(), apnsRule(), webpushRule(), fields(map[string]rule{"analytics_label": analyticsLabel()})}
}

// parsePlatform checks and normalizes the four objects (nil or JSON null:
// absent). Running it on its own output gives the same output, so a
// stored message is parsed again, for its templates, when it runs.
func parsePlatform(raw [4]json.RawMessage) ([4]override, error) {
	var out [4]override
	rules := platformRules()
	for i, r := range raw {
		if len(r) == 0 || string(r) == "null" {
			continue
		}
		var v any
		if err := json.Unmarshal(r, &v); err != nil {
			return out, FieldErrorf("invalid_value", overrideNames[i], "%s is not valid JSON: %v", overrideNames[i], err)
		}
		if v == nil {
			continue
		}
		w := &walker{}
		n, err := rules[i](w, path{name: overrideNames[i]}, v)
		if err != nil {
			return out, err
		}
		out[i] = override{tree: n.(map[string]any), leaves: w.leaves}
	}
	return out, nil
}

// encodePlatform is the stored form of the four objects.
func encodePlatform(p [4]override) ([4]json.RawMessage, error) {
	var out [4]json.RawMessage
	for i, o := range p {
		if o.tree == nil {
			continue
		}
		raw, err := json.Marshal(o.tree)
		if err != nil {
			return out, fmt.Errorf("encoding %s: %w", overrideNames[i], err)
		}
		out[i] = raw
	}
	return out, nil
}

// platformSize is what the objects add to the payload FCM's 4096-byte
// limit counts (see payloadSize), as sent: with pushfan's delivery
// defaults (fanout.Delivery) where the request set none, at their
// longest (the longest tag, priority and lifetime), so that no
// configuration of them can push an accepted message over the limit.
func platformSize(p [4]override) int {
	n := 0
	for i, o := range p {
		tree := withLongestDefaults(overrideNames[i], o.tree)
		if tree == nil {
			continue
		}
		raw, err := json.Marshal(tree)
		if err != nil {
			return math.MaxInt // unreachable for decoded JSON; refuse rather than guess
		}
		n += len(`,"`) + len(overrideNames[i]) + len(`":`) + len(raw)
	}
	return n
}

var analyticsLabelPattern = regexp.MustCompile(`^[a-zA-Z0-9\-_.~%]{1,50}$`)

// analyticsLabel is FCM's analytics label: 1-50 of [a-zA-Z0-9-_.~%].
func analyticsLabel() rule {
	return pattern(analyticsLabelPattern, "1-50 characters of a-z, A-Z, 0-9 and -_.~%")
}

// locArgs refuses localization arguments without their key, as the SDK
// does.
func locArgs(r rule, pairs ...[2]string) rule {
	return func(w *walker, p path, v any) (any, error) {
		out, err := r(w, p, v)
		if err != nil {
			return nil, err
		}
		m := out.(map[string]any)
		for _, pr := range pairs {
			if _, args := m[pr[0]]; args {
				if _, key := m[pr[1]]; !key {
					return nil, FieldErrorf("invalid_value", p.key(pr[0]).name, "%s needs %s", p.key(pr[0]).name, p.key(pr[1]).name)
				}
			}
		}
		return out, nil
	}
}

func androidRule() rule {
	notification := locArgs(fields(map[string]rule{
		"title":                   text(),
		"body":                    text(),
		"icon":                    text(),
		"color":                   color(),
		"sound":                   text(),
		"tag":                     text(),
		"click_action":            text(),
		"body_loc_key":            text(),
		"body_loc_args":           list(text()),
		"title_loc_key":           text(),
		"title_loc_args":          list(text()),
		"channel_id":              text(),
		"image":                   link(true),
		"ticker":                  text(),
		"sticky":                  boolean(),
		"event_time":              timestamp(),
		"local_only":              boolean(),
		"notification_priority":   enum("PRIORITY_MIN", "PRIORITY_LOW", "PRIORITY_DEFAULT", "PRIORITY_HIGH", "PRIORITY_MAX"),
		"default_sound":           boolean(),
		"default_vibrate_timings": boolean(),
		"default_light_settings":  boolean(),
		"vibrate_timings":         list(duration(time.Minute, true)),
		"visibility":              enum("PRIVATE", "PUBLIC", "SECRET"),
		"notification_count":      integer(0, math.MaxInt32),
		"light_settings":          lightSettings(),
		"proxy":                   enum("ALLOW", "DENY", "IF_PRIORITY_LOWERED"),
	}), [2]string{"body_loc_args", "body_loc_key"}, [2]string{"title_loc_args", "title_loc_key"})
	return fields(map[string]rule{
		"collapse_key":            text(),
		"priority":                enum("normal", "high"),
		"ttl":                     duration(maxTTL, false),
		"restricted_package_name": text(),
		"data":                    dataMap(),
		"notification":            notification,
		"fcm_options":             fields(map[string]rule{"analytics_label": analyticsLabel()}),
		"direct_boot_ok":          boolean(),
	})
}

// timestamp is an RFC 3339 time, sent in UTC with nine fractional digits
// (the only form the SDK reads back).
func timestamp() rule {
	return func(_ *walker, p path, v any) (any, error) {
		s, ok := v.(string)
		if !ok {
			return nil, typeError(p, "an RFC 3339 time string", v)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, FieldErrorf("invalid_value", p.name, "%s must be an RFC 3339 time such as 2026-12-01T09:00:00Z, got %q", p.name, s)
		}
		return t.UTC().Format("2006-01-02T15:04:05.000000000Z"), nil
	}
}

// lightSettings is android.notification.light_settings: a google.type.Color
// and two durations, all of which the SDK always sends. The SDK carries
// color channels as 8-bit values, so each is normalized to the nearest
// multiple of 1/255.
func lightSettings() rule {
	channel := number(0, 1)
	colorObj := fields(map[string]rule{"red": channel, "green": channel, "blue": channel, "alpha": channel})
	inner := fields(map[string]rule{
		"color":              colorObj,
		"light_on_duration":  duration(time.Hour, true),
		"light_off_duration": duration(time.Hour, true),
	})
	return func(w *walker, p path, v any) (any, error) {
		out, err := inner(w, p, v)
		if err != nil {
			return nil, err
		}
		m := out.(map[string]any)
		c, ok := m["color"].(map[string]any)
		if !ok {
			return nil, FieldErrorf("invalid_value", p.key("color").name, "%s is required, e.g. {\"red\":1,\"green\":0.5,\"blue\":0}", p.key("color").name)
		}
		norm := map[string]any{}
		for _, ch := range []string{"red", "green", "blue", "alpha"} {
			f, ok := c[ch].(float64)
			if !ok {
				f = 0
				if ch == "alpha" {
					f = 1 // google.type.Color: no alpha is opaque
				}
			}
			norm[ch] = float64(int64(math.Round(f*255))) / 255.0
		}
		m["color"] = norm
		for _, d := range []string{"light_on_duration", "light_off_duration"} {
			if _, ok := m[d]; !ok {
				m[d] = "0s"
			}
		}
		return m, nil
	}
}

var apnsIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func apnsRule() rule {
	headers := headerRule(map[string]rule{
		"apns-priority":    enum("10", "5", "1"),
		"apns-push-type":   enum("alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity", "pushtotalk", "controls", "widgets"),
		"apns-expiration":  pattern(regexp.MustCompile(`^[0-9]{1,12}$`), "a UNIX time in seconds, or 0"),
		"apns-collapse-id": maxBytes(64),
		"apns-topic":       maxBytes(255),
		"apns-id":          pattern(apnsIDPattern, "a UUID such as 123e4567-e89b-12d3-a456-4266554400a0"),
	}, func(k string) string { return strings.ToLower(k) })
	alert := locArgs(fields(map[string]rule{
		"title":             text(),
		"subtitle":          text(),
		"body":              text(),
		"loc-key":           text(),
		"loc-args":          list(text()),
		"title-loc-key":     text(),
		"title-loc-args":    list(text()),
		"subtitle-loc-key":  text(),
		"subtitle-loc-args": list(text()),
		"action-loc-key":    text(),
		"launch-image":      text(),
	}), [2]string{"loc-args", "loc-key"}, [2]string{"title-loc-args", "title-loc-key"}, [2]string{"subtitle-loc-args", "subtitle-loc-key"})
	sound := fields(map[string]rule{"critical": flag(), "name": text(), "volume": nonZero(number(0, 1))})
	aps := fields(map[string]rule{
		// The keys the SDK's Aps type has...
		"alert":             stringOr(alert),
		"badge":             integer(0, math.MaxInt32),
		"sound":             stringOr(sound),
		"content-available": flag(),
		"mutable-content":   flag(),
		"category":          text(),
		"thread-id":         text(),
		// ...and the rest of Apple's aps dictionary, which it carries as
		// custom data.
		"target-content-id":  text(),
		"interruption-level": enum("passive", "active", "time-sensitive", "critical"),
		"relevance-score":    number(0, 1),
		"filter-criteria":    text(),
		"stale-date":         integer(0, 1<<53),
		"content-state":      object(freeJSON()),
		"timestamp":          integer(0, 1<<53),
		"event":              enum("start", "update", "end"),
		"dismissal-date":     integer(0, 1<<53),
		"attributes-type":    text(),
		"attributes":         object(freeJSON()),
	})
	payload := func(w *walker, p path, v any) (any, error) {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, typeError(p, "an object", v)
		}
		out := make(map[string]any, len(m)+1)
		for _, k := range sortedKeys(m) {
			var n any
			var err error
			if k == "aps" {
				if m[k] == nil {
					continue
				}
				n, err = aps(w, p.key(k), m[k])
			} else {
				n, err = freeJSON()(w, p.key(k), m[k]) // APNs: the app's own keys beside aps
			}
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		if _, ok := out["aps"]; !ok {
			out["aps"] = map[string]any{} // the SDK always sends aps
		}
		return out, nil
	}
	return fields(map[string]rule{
		"headers":             headers,
		"payload":             payload,
		"fcm_options":         fields(map[string]rule{"analytics_label": analyticsLabel(), "image": link(true)}),
		"live_activity_token": text(),
	})
}

func webpushRule() rule {
	canonical := map[string]string{"ttl": "TTL", "urgency": "Urgency", "topic": "Topic"}
	headers := headerRule(map[string]rule{
		"TTL":     pattern(regexp.MustCompile(`^[0-9]{1,10}$`), "a number of seconds"),
		"Urgency": enum("very-low", "low", "normal", "high"),
		"Topic":   pattern(regexp.MustCompile(`^[A-Za-z0-9_\-]{1,32}$`), "1-32 URL-safe base64 characters"),
	}, func(k string) string {
		if c, ok := canonical[strings.ToLower(k)]; ok {
			return c
		}
		return k
	})
	notification := fields(map[string]rule{
		"actions":            list(fields(map[string]rule{"action": text(), "title": text(), "icon": text()})),
		"title":              text(),
		"body":               text(),
		"icon":               text(),
		"badge":              text(),
		"dir":                enum("auto", "ltr", "rtl"),
		"data":               freeJSON(),
		"image":              text(),
		"lang":               text(),
		"renotify":           boolean(),
		"requireInteraction": boolean(),
		"silent":             boolean(),
		"tag":                text(),
		"timestamp":          integer(0, 1<<53),
		"vibrate":            list(integer(0, 1<<31-1)),
	})
	options := fields(map[string]rule{"link": link(false)})
	return fields(map[string]rule{
		"headers":      headers,
		"data":         dataMap(),
		"notification": notification,
		"fcm_options": func(w *walker, p path, v any) (any, error) {
			out, err := options(w, p, v)
			if err != nil {
				return nil, err
			}
			if _, ok := out.(map[string]any)["link"]; !ok {
				return nil, FieldErrorf("invalid_value", p.key("link").name, "%s is required when webpush.fcm_options is set", p.key("link").name)
			}
			return out, nil
		},
	})
}

// headerRule is a map of HTTP headers: names are matched after canon, and
// every value is a string checked by its header's rule. An empty map is
// left out.
func headerRule(known map[string]rule, canon func(string) string) rule {
	return func(w *walker, p path, v any) (any, error) {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, typeError(p, "an object of string values", v)
		}
		out := make(map[string]any, len(m))
		for _, k := range sortedKeys(m) {
			name := canon(k)
			kp := p.key(name)
			r, ok := known[name]
			if !ok {
				return nil, unknownField(p.key(k), known)
			}
			if _, dup := out[name]; dup {
				return nil, FieldErrorf("invalid_value", kp.name, "header %s is given twice", name)
			}
			if _, ok := m[k].(string); !ok {
				return nil, typeError(kp, `a string (header values are strings, e.g. "10")`, m[k])
			}
			n, err := r(w, kp, m[k])
			if err != nil {
				return nil, err
			}
			if n != nil {
				out[name] = n
			}
		}
		if len(out) == 0 {
			return nil, nil
		}
		return out, nil
	}
}

// pattern is a string matching re, described by want.
func pattern(re *regexp.Regexp, want string) rule {
	return func(_ *walker, p path, v any) (any, error) {
		s, ok := v.(string)
		if !ok {
			return nil, typeError(p, "a string", v)
		}
		if s == "" {
			return nil, nil
		}
		if !re.MatchString(s) {
			return nil, FieldErrorf("invalid_value", p.name, "%s must be %s, got %q", p.name, want, s)
		}
		return s, nil
	}
}

// maxBytes is a string of at most n bytes (not a template: an identifier).
func maxBytes(n int) rule {
	return func(_ *walker, p path, v any) (any, error) {
		s, ok := v.(string)
		if !ok {
			return nil, typeError(p, "a string", v)
		}
		if len(s) > n {
			return nil, FieldErrorf("invalid_value", p.name, "%s must be at most %d bytes, got %d", p.name, n, len(s))
		}
		if s == "" {
			return nil, nil
		}
		return s, nil
	}
}

// stringOr is a string (a template) or an object checked by obj, as
// aps.alert and aps.sound are.
func stringOr(obj rule) rule {
	t := text()
	return func(w *walker, p path, v any) (any, error) {
		if _, ok := v.(string); ok {
			return t(w, p, v)
		}
		if _, ok := v.(map[string]any); ok {
			return obj(w, p, v)
		}
		return nil, typeError(p, "a string or an object", v)
	}
}

// object is r for a value that must be a JSON object.
func object(r rule) rule {
	return func(w *walker, p path, v any) (any, error) {
		if _, ok := v.(map[string]any); !ok {
			return nil, typeError(p, "an object", v)
		}
		return r(w, p, v)
	}
}
