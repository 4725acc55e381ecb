package message

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The rules normalize REST-shaped input to the SDK's spelling, and are
// idempotent on their output (a stored message is parsed again when it
// runs, for its templates).
func TestPlatformNormalization(t *testing.T) {
	in := [4]json.RawMessage{
		json.RawMessage(`{"priority":"HIGH","ttl":"1.5s","data":{},"restricted_package_name":null,
			"notification":{"channel_id":"promo","sound":"","event_time":"2026-01-02T12:04:05+09:00","visibility":"public",
				"vibrate_timings":["0.25s"],"light_settings":{"color":{"red":1,"green":0.5}},"sticky":false}}`),
		json.RawMessage(`{"headers":{"APNS-Priority":"5"},"payload":{"deal":"42"}}`),
		json.RawMessage(`{"headers":{"urgency":"high"},"fcm_options":{"link":"https://example.com/sale"}}`),
		json.RawMessage(`{}`),
	}
	want := []string{
		`{"notification":{"channel_id":"promo","event_time":"2026-01-02T03:04:05.000000000Z","light_settings":{"color":{"alpha":1,"blue":0,"green":0.5019607843137255,"red":1},"light_off_duration":"0s","light_on_duration":"0s"},"vibrate_timings":["0.250000000s"],"visibility":"PUBLIC"},"priority":"high","ttl":"1.500000000s"}`,
		`{"headers":{"apns-priority":"5"},"payload":{"aps":{},"deal":"42"}}`,
		`{"fcm_options":{"link":"https://example.com/sale"},"headers":{"Urgency":"high"}}`,
		`{}`,
	}
	p, err := parsePlatform(in)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := encodePlatform(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if string(raw[i]) != want[i] {
			t.Errorf("%s:\n got  %s\n want %s", overrideNames[i], raw[i], want[i])
		}
	}
	again, err := parsePlatform(raw)
	if err != nil {
		t.Fatal(err)
	}
	raw2, _ := encodePlatform(again)
	if !reflect.DeepEqual(raw, raw2) {
		t.Fatalf("not idempotent:\n %s\n %s", raw, raw2)
	}
}
