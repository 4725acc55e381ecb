package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"pushfan/model"
)

// A/B variants: a broadcast may carry 2 to MaxVariants full messages with
// weights; each user gets one of them, chosen from a hash of the broadcast
// and the user (message.PickVariant), so that all of a user's devices, and
// a chunk taken over after a crash, send the same one.
const (
	MinVariants = 2
	MaxVariants = 5
	// maxWeight bounds a variant's weight (a percentage, or any relative
	// share).
	maxWeight = 1000
)

// VariantSpec is one A/B variant as the request gives it: a full message
// (as the top-level fields of a broadcast without variants) and its weight.
type VariantSpec struct {
	Name        string                     `json:"name"`
	Weight      int                        `json:"weight"`
	Title       string                     `json:"title"`
	Body        string                     `json:"body"`
	Image       string                     `json:"image"`
	Data        map[string]string          `json:"data"`
	Localized   map[string]model.Localized `json:"localized"`
	LinkDataKey string                     `json:"link_data_key"`
	Android     json.RawMessage            `json:"android"`
	APNS        json.RawMessage            `json:"apns"`
	Webpush     json.RawMessage            `json:"webpush"`
	FCMOptions  json.RawMessage            `json:"fcm_options"`
}

// spec is v as a broadcast's message fields, for the message rules.
func (v VariantSpec) spec(track *bool) Spec {
	return Spec{Title: v.Title, Body: v.Body, Image: v.Image, Data: v.Data, Localized: v.Localized, LinkDataKey: v.LinkDataKey,
		Android: v.Android, APNS: v.APNS, Webpush: v.Webpush, FCMOptions: v.FCMOptions, Track: track}
}

var variantName = regexp.MustCompile(`^[a-z0-9_-]{1,16}$`)

// checkVariantsOnly: with variants, the message is in them, not beside.
func checkVariantsOnly(spec Spec) error {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"title", spec.Title != ""}, {"body", spec.Body != ""}, {"image", spec.Image != ""}, {"data", len(spec.Data) > 0},
		{"localized", len(spec.Localized) > 0}, {"link_data_key", spec.LinkDataKey != ""},
		{"android", len(spec.Android) > 0}, {"apns", len(spec.APNS) > 0}, {"webpush", len(spec.Webpush) > 0}, {"fcm_options", len(spec.FCMOptions) > 0},
	} {
		if f.set {
			return fieldError("invalid_value", f.name, "%s is set beside variants: with variants, each variant holds its whole message", f.name)
		}
	}
	return nil
}

// abMessage checks spec's A/B variants and returns the stored message that
// holds them. Their messages follow every rule of a broadcast's message;
// template variables are refused (each target's message is one of the
// variants, prepared once a run).
func (r Rules) abMessage(spec Spec, tracked bool) (model.Message, error) {
	n := len(spec.Variants)
	if n < MinVariants || n > MaxVariants {
		return model.Message{}, fieldError("invalid_value", "variants", "variants holds %d messages; give %d to %d", n, MinVariants, MaxVariants)
	}
	out := model.Message{Track: untrack(spec.Track)}
	seen := map[string]bool{}
	for i, v := range spec.Variants {
		prefix := fmt.Sprintf("variants[%d]", i)
		if v.Name == "" {
			v.Name = string(rune('a' + i))
		}
		switch {
		case !variantName.MatchString(v.Name):
			return model.Message{}, fieldError("invalid_value", prefix+".name", "%q is not a variant name: 1 to 16 of a-z, 0-9, _ and -", v.Name)
		case seen[v.Name]:
			return model.Message{}, fieldError("invalid_value", prefix+".name", "variant name %q is given twice", v.Name)
		case v.Weight < 1 || v.Weight > maxWeight:
			return model.Message{}, fieldError("invalid_value", prefix+".weight", "weight must be 1 to %d (a share of the users), got %d", maxWeight, v.Weight)
		}
		seen[v.Name] = true
		vs := v.spec(spec.Track)
		plat, tagBytes, err := r.checkMessage(vs, tracked)
		if err == nil {
			var m model.Message
			if m, err = r.checkTemplates(vs, plat, []string{}, tagBytes); err == nil {
				m.Track = nil // the broadcast's, above
				out.Variants = append(out.Variants, model.ABVariant{Name: v.Name, Weight: v.Weight, Message: m})
				continue
			}
		}
		var fe *FieldError
		if errors.As(err, &fe) {
			c := *fe
			c.Field = prefix + "." + c.Field
			if fe.Field == "" {
				c.Field = prefix
			}
			return model.Message{}, &c
		}
		return model.Message{}, err
	}
	return out, nil
}
