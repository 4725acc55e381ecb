package rules

import (
	"errors"
	"net/url"
	"strings"
	"unicode/utf8"

	"pushfan/audience"
	"pushfan/broadcast/message"
	"pushfan/model"
)

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
