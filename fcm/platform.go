package fcm

import (
	"encoding/json"
	"fmt"
	"math"
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

// setCollapseDefaults applies pushfan's collapse key where the message
// sets none of its own.
func setCollapseDefaults(m *messaging.Message, key string) {
	if key == "" {
		return
	}
	if m.Android == nil {
		m.Android = &messaging.AndroidConfig{}
	}
	if m.Android.CollapseKey == "" {
		m.Android.CollapseKey = key
	}
	if m.APNS == nil {
		m.APNS = &messaging.APNSConfig{}
	}
	if _, ok := m.APNS.Headers["apns-collapse-id"]; !ok {
		h := make(map[string]string, len(m.APNS.Headers)+1)
		for k, v := range m.APNS.Headers {
			h[k] = v
		}
		h["apns-collapse-id"] = key
		m.APNS.Headers = h
	}
}
