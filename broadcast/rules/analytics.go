package rules

import (
	"encoding/json"
	"regexp"
	"strconv"

	"pushfan/model"
)

// Firebase reports delivery data (received, impressions on Android) in its
// BigQuery export and Data API keyed by fcm_options.analytics_label, and at
// most 100 distinct labels a day: so every message carries one, but never
// one per broadcast by default. It is, first found:
//
//   - the request's analytics_label (or its fcm_options.analytics_label,
//     or a variant's: the message's own);
//   - the cron job's: its analytics_label, or its message's
//     fcm_options.analytics_label (JobRequest puts them in the spec as a
//     request's);
//   - the category's name, when it is a valid label.
//
// docs/analytics.md joins Firebase's export to a broadcast by it.

// analyticsLabelRule is FCM's rule for an analytics label.
var analyticsLabelRule = regexp.MustCompile(`^[a-zA-Z0-9\-_.~%]{1,50}$`)

// withAnalyticsLabel sets spec's fcm_options.analytics_label (each
// variant's, with variants) as above; a bad analytics_label is a 400
// naming it.
func withAnalyticsLabel(spec Spec, cat *model.Category) (Spec, error) {
	label := spec.AnalyticsLabel
	if label != "" && !analyticsLabelRule.MatchString(label) {
		return spec, fieldError("invalid_value", "analytics_label", "analytics_label must be 1 to 50 letters, digits or -_.~%% (FCM's rule), got %q", label)
	}
	if label == "" && cat != nil && analyticsLabelRule.MatchString(cat.Name) {
		label = cat.Name
	}
	if label == "" {
		return spec, nil
	}
	var err error
	if len(spec.Variants) == 0 {
		spec.FCMOptions, err = labelOptions(spec.FCMOptions, label, spec.AnalyticsLabel != "", "fcm_options")
		return spec, err
	}
	vs := make([]VariantSpec, len(spec.Variants))
	for i, v := range spec.Variants {
		if v.FCMOptions, err = labelOptions(v.FCMOptions, label, spec.AnalyticsLabel != "", "variants["+strconv.Itoa(i)+"].fcm_options"); err != nil {
			return spec, err
		}
		vs[i] = v
	}
	spec.Variants = vs
	return spec, nil
}

// labelOptions returns the fcm_options object raw with analytics_label set
// to label, unless it has one (the message's own wins over a default; one
// that disagrees with the request's analytics_label, explicit, is a 400).
// A raw that is not an object is left for the overrides' rules to refuse.
func labelOptions(raw json.RawMessage, label string, explicit bool, at string) (json.RawMessage, error) {
	opts := map[string]any{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &opts); err != nil {
			return raw, nil
		}
	}
	if own, ok := opts["analytics_label"]; ok {
		if s, _ := own.(string); explicit && s != label {
			return raw, fieldError("invalid_value", "analytics_label", "analytics_label %q disagrees with %s.analytics_label %q: give one", label, at, s)
		}
		return raw, nil
	}
	opts["analytics_label"] = label
	out, err := json.Marshal(opts)
	if err != nil {
		return raw, fieldError("invalid_value", at, "%s: %v", at, err)
	}
	return out, nil
}
