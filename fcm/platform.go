package fcm

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"firebase.google.com/go/v4/messaging"

	"pushfan/fanout"
)

// setPlatform decodes the message's platform overrides (the REST API's
// JSON, as the request rules normalized it) into the SDK's types, so that
// both clients send what the SDK encodes. The rules already spell values
// the way the SDK reads and writes them; light_settings is the exception
// that is built by hand, because the SDK's own decoding of a
// google.type.Color drops leading zeros of the hex channels and cannot be
// encoded again.
func setPlatform(m *messaging.Message, p fanout.Platform) error {
	if len(p.Android) > 0 {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(p.Android, &raw); err != nil {
			return fmt.Errorf("fcm: decoding android: %w", err)
		}
		var light *messaging.LightSettings
		if n, ok := raw["notification"]; ok {
			rest, ls, err := splitLightSettings(n)
			if err != nil {
				return err
			}
			raw["notification"], light = rest, ls
		}
		a := &messaging.AndroidConfig{}
		if err := remarshal(raw, a); err != nil {
			return fmt.Errorf("fcm: decoding android: %w", err)
		}
		if light != nil {
			a.Notification.LightSettings = light
		}
		m.Android = a
	}
	if len(p.APNS) > 0 {
		m.APNS = &messaging.APNSConfig{}
		if err := json.Unmarshal(p.APNS, m.APNS); err != nil {
			return fmt.Errorf("fcm: decoding apns: %w", err)
		}
	}
	if len(p.Webpush) > 0 {
		m.Webpush = &messaging.WebpushConfig{}
		if err := json.Unmarshal(p.Webpush, m.Webpush); err != nil {
			return fmt.Errorf("fcm: decoding webpush: %w", err)
		}
	}
	if len(p.FCMOptions) > 0 {
		m.FCMOptions = &messaging.FCMOptions{}
		if err := json.Unmarshal(p.FCMOptions, m.FCMOptions); err != nil {
			return fmt.Errorf("fcm: decoding fcm_options: %w", err)
		}
	}
	return nil
}

// splitLightSettings takes light_settings out of an android notification.
func splitLightSettings(notification json.RawMessage) (json.RawMessage, *messaging.LightSettings, error) {
	var n map[string]json.RawMessage
	if err := json.Unmarshal(notification, &n); err != nil {
		return nil, nil, fmt.Errorf("fcm: decoding android.notification: %w", err)
	}
	raw, ok := n["light_settings"]
	if !ok {
		return notification, nil, nil
	}
	delete(n, "light_settings")
	rest, err := json.Marshal(n)
	if err != nil {
		return nil, nil, fmt.Errorf("fcm: encoding android.notification: %w", err)
	}
	var ls struct {
		Color struct {
			Red, Green, Blue, Alpha float64
		} `json:"color"`
		On  string `json:"light_on_duration"`
		Off string `json:"light_off_duration"`
	}
	if err := json.Unmarshal(raw, &ls); err != nil {
		return nil, nil, fmt.Errorf("fcm: decoding android.notification.light_settings: %w", err)
	}
	on, err := time.ParseDuration(ls.On)
	if err != nil {
		return nil, nil, fmt.Errorf("fcm: android.notification.light_settings.light_on_duration: %w", err)
	}
	off, err := time.ParseDuration(ls.Off)
	if err != nil {
		return nil, nil, fmt.Errorf("fcm: android.notification.light_settings.light_off_duration: %w", err)
	}
	ch := func(f float64) int64 { return int64(math.Round(f * 255)) }
	c := ls.Color
	return rest, &messaging.LightSettings{
		Color:                  fmt.Sprintf("#%02X%02X%02X%02X", ch(c.Red), ch(c.Green), ch(c.Blue), ch(c.Alpha)),
		LightOnDurationMillis:  on.Milliseconds(),
		LightOffDurationMillis: off.Milliseconds(),
	}, nil
}

func remarshal(v any, dst any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, dst)
}

// setDeliveryDefaults applies the message's delivery defaults (see
// fanout.Delivery) where its own objects set nothing: the display tag on
// Android's and web push's notification (only when there is one: a tag
// would turn a data message into a notification) and as apns-collapse-id;
// Android's priority and ttl; apns-priority (5 for a message with no
// notification, which APNs takes as a background push) and
// apns-expiration; web push's TTL and Urgency headers.
func setDeliveryDefaults(m *messaging.Message, d fanout.Delivery) {
	shows := m.Notification != nil
	if d.AndroidPriority != "" || d.TTL > 0 || (d.DisplayTag != "" && (shows || m.Android != nil && m.Android.Notification != nil)) {
		if m.Android == nil {
			m.Android = &messaging.AndroidConfig{}
		}
		a := m.Android
		if a.Priority == "" {
			a.Priority = d.AndroidPriority
		}
		if a.TTL == nil && d.TTL > 0 {
			ttl := d.TTL
			a.TTL = &ttl
		}
		if d.DisplayTag != "" && (shows || a.Notification != nil) {
			if a.Notification == nil {
				a.Notification = &messaging.AndroidNotification{}
			}
			if a.Notification.Tag == "" {
				a.Notification.Tag = d.DisplayTag
			}
		}
	}
	apns := map[string]string{}
	if d.DisplayTag != "" {
		apns["apns-collapse-id"] = d.DisplayTag
	}
	if p := d.APNSPriority; p != "" {
		if !shows && !apnsAlert(m.APNS) {
			p = "5"
		}
		apns["apns-priority"] = p
	}
	if d.TTL > 0 && !d.Built.IsZero() {
		apns["apns-expiration"] = strconv.FormatInt(d.Built.Add(d.TTL).Unix(), 10)
	}
	if len(apns) > 0 {
		if m.APNS == nil {
			m.APNS = &messaging.APNSConfig{}
		}
		m.APNS.Headers = withHeaders(m.APNS.Headers, apns)
	}
	web := map[string]string{}
	if d.TTL > 0 {
		web["TTL"] = strconv.FormatInt(int64(d.TTL/time.Second), 10)
	}
	switch d.AndroidPriority {
	case "high":
		web["Urgency"] = "high"
	case "normal":
		web["Urgency"] = "normal"
	}
	webShows := shows || m.Webpush != nil && m.Webpush.Notification != nil
	if len(web) > 0 || d.DisplayTag != "" && webShows {
		if m.Webpush == nil {
			m.Webpush = &messaging.WebpushConfig{}
		}
		w := m.Webpush
		w.Headers = withHeaders(w.Headers, web)
		if d.DisplayTag != "" && webShows {
			if w.Notification == nil {
				w.Notification = &messaging.WebpushNotification{}
			}
			if w.Notification.Tag == "" {
				w.Notification.Tag = d.DisplayTag
			}
		}
	}
}

// apnsAlert reports whether an apns object asks for an alert of its own
// (aps.alert), which makes a message a visible one on iOS.
func apnsAlert(a *messaging.APNSConfig) bool {
	return a != nil && a.Payload != nil && a.Payload.Aps != nil && (a.Payload.Aps.Alert != nil || a.Payload.Aps.AlertString != "")
}

// withHeaders is h with defaults added where h has no value of the same
// name (HTTP header names compare without case), in a copy: h may be
// shared by every send of the message.
func withHeaders(h, defaults map[string]string) map[string]string {
	if len(defaults) == 0 {
		return h
	}
	out := make(map[string]string, len(h)+len(defaults))
	for k, v := range h {
		out[k] = v
	}
	for k, v := range defaults {
		if !hasHeader(h, k) {
			out[k] = v
		}
	}
	return out
}

func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}
