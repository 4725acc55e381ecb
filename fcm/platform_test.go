package fcm

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"pushfan/fanout"
	"pushfan/fcmemu"
)

// Every field the request rules accept, as they normalize it (the shape
// broadcast stores), in all four objects.
const (
	sampleAndroid = `{"collapse_key":"sale-1","priority":"high","ttl":"1.500000000s","restricted_package_name":"com.example.app",
		"data":{"k":"android-v"},"direct_boot_ok":true,"fcm_options":{"analytics_label":"a_1"},
		"notification":{"title":"T","body":"B","icon":"ic","color":"#ff8800","sound":"default","tag":"sale","click_action":"OPEN",
			"body_loc_key":"bk","body_loc_args":["x",""],"title_loc_key":"tk","title_loc_args":["z"],"channel_id":"promo",
			"image":"https://example.com/a.png","ticker":"tick","sticky":true,"event_time":"2026-01-02T03:04:05.000000000Z",
			"local_only":true,"notification_priority":"PRIORITY_HIGH","default_sound":true,"default_vibrate_timings":true,
			"default_light_settings":true,"vibrate_timings":["0.500000000s","1s"],"visibility":"PUBLIC","notification_count":0,
			"light_settings":{"color":{"red":1,"green":0.5019607843137255,"blue":0,"alpha":0.0392156862745098},"light_on_duration":"1.500000000s","light_off_duration":"2s"},
			"proxy":"DENY"}}`
	sampleAPNS = `{"headers":{"apns-priority":"5","apns-push-type":"alert","apns-expiration":"0","apns-topic":"com.example.app",
			"apns-id":"123e4567-e89b-12d3-a456-426655440000"},
		"payload":{"aps":{"alert":{"title":"T","subtitle":"S","body":"B","loc-key":"lk","loc-args":["a"],"title-loc-key":"tlk",
				"title-loc-args":["b"],"subtitle-loc-key":"slk","subtitle-loc-args":["c"],"action-loc-key":"alk","launch-image":"li.png"},
			"badge":3,"sound":{"critical":1,"name":"alarm.caf","volume":0.5},"content-available":1,"mutable-content":1,
			"category":"SALE","thread-id":"th","interruption-level":"time-sensitive","relevance-score":0.75,"target-content-id":"tc",
			"content-state":{"score":"1-0"}},
			"custom":{"deep":[1,"two",null,true]},"deal_id":"42"},
		"fcm_options":{"analytics_label":"apns_l","image":"https://example.com/i.png"},"live_activity_token":"lat"}`
	sampleWebpush = `{"headers":{"TTL":"60","Urgency":"high","Topic":"sale"},"data":{"w":"1"},
		"notification":{"actions":[{"action":"open","title":"Open","icon":"https://example.com/o.png"},{}],"title":"T","body":"B",
			"icon":"i","badge":"b","dir":"rtl","data":{"x":[1,2.5],"y":"z"},"image":"https://example.com/w.png","lang":"ko",
			"renotify":true,"requireInteraction":true,"silent":true,"tag":"t","timestamp":1700000000000,"vibrate":[100,50,100]},
		"fcm_options":{"link":"https://example.com/sale"}}`
	sampleFCMOptions = `{"analytics_label":"campaign_7"}`
)

func samplePlatform() fanout.Platform {
	return fanout.Platform{Android: json.RawMessage(sampleAndroid), APNS: json.RawMessage(sampleAPNS),
		Webpush: json.RawMessage(sampleWebpush), FCMOptions: json.RawMessage(sampleFCMOptions)}
}

// Each override object reaches FCM as given, through both clients, and
// the delivery defaults are added only where the message sets none: no
// collapse_key unless the request asks (FCM keeps four collapse keys per
// offline device), the display tag only on a message that shows a
// notification, apns-priority 5 for one that shows none.
func TestPlatformOverridesReachFCMAsGiven(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	emu.RecordMessages()
	srv := httptest.NewServer(emu.Handler())
	defer srv.Close()

	built := time.Unix(1_800_000_000, 0)
	bulk := fanout.Delivery{DisplayTag: "pushfan-9", AndroidPriority: "normal", APNSPriority: "5", TTL: 28 * 24 * time.Hour, Built: built}
	urgent := fanout.Delivery{DisplayTag: "pushfan-9", AndroidPriority: "high", APNSPriority: "10", TTL: 24 * time.Hour, Built: built}
	withAPNSID := func(raw string, id string) any {
		v := decodeAny(t, []byte(raw))
		v.(map[string]any)["headers"].(map[string]any)["apns-collapse-id"] = id
		return v
	}
	cases := []struct {
		name     string
		noNotice bool // a data message: no title nor body
		delivery fanout.Delivery
		plat     fanout.Platform
		want     map[string]any // the message's objects at FCM
	}{
		{"every field", false, bulk, samplePlatform(), map[string]any{
			"android":     decodeAny(t, []byte(sampleAndroid)), // its own priority, ttl, tag and collapse_key win
			"apns":        withAPNSID(sampleAPNS, "pushfan-9"),
			"webpush":     decodeAny(t, []byte(sampleWebpush)),
			"fcm_options": decodeAny(t, []byte(sampleFCMOptions)),
		}},
		{"bulk, no overrides", false, bulk, fanout.Platform{}, map[string]any{
			"android": map[string]any{"priority": "normal", "ttl": "2419200s", "notification": map[string]any{"tag": "pushfan-9"}},
			"apns":    map[string]any{"headers": map[string]any{"apns-collapse-id": "pushfan-9", "apns-priority": "5", "apns-expiration": "1802419200"}},
			"webpush": map[string]any{"headers": map[string]any{"TTL": "2419200", "Urgency": "normal"}, "notification": map[string]any{"tag": "pushfan-9"}},
		}},
		{"transactional, no overrides", false, urgent, fanout.Platform{}, map[string]any{
			"android": map[string]any{"priority": "high", "ttl": "86400s", "notification": map[string]any{"tag": "pushfan-9"}},
			"apns":    map[string]any{"headers": map[string]any{"apns-collapse-id": "pushfan-9", "apns-priority": "10", "apns-expiration": "1800086400"}},
			"webpush": map[string]any{"headers": map[string]any{"TTL": "86400", "Urgency": "high"}, "notification": map[string]any{"tag": "pushfan-9"}},
		}},
		{"a data message, transactional", true, urgent, fanout.Platform{}, map[string]any{
			"android": map[string]any{"priority": "high", "ttl": "86400s"},
			"apns":    map[string]any{"headers": map[string]any{"apns-collapse-id": "pushfan-9", "apns-priority": "5", "apns-expiration": "1800086400"}},
			"webpush": map[string]any{"headers": map[string]any{"TTL": "86400", "Urgency": "high"}},
		}},
		{"the request's collapse key and headers", false, bulk, fanout.Platform{
			Android: json.RawMessage(`{"collapse_key":"news","priority":"high"}`),
			APNS:    json.RawMessage(`{"headers":{"apns-collapse-id":"news","apns-priority":"10"}}`),
			Webpush: json.RawMessage(`{"headers":{"ttl":"60","Topic":"news"}}`),
		}, map[string]any{
			"android": map[string]any{"collapse_key": "news", "priority": "high", "ttl": "2419200s", "notification": map[string]any{"tag": "pushfan-9"}},
			"apns":    map[string]any{"headers": map[string]any{"apns-collapse-id": "news", "apns-priority": "10", "apns-expiration": "1802419200"}},
			"webpush": map[string]any{"headers": map[string]any{"ttl": "60", "Topic": "news", "Urgency": "normal"}, "notification": map[string]any{"tag": "pushfan-9"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var bodies []json.RawMessage
			for _, c := range []string{ClientSDK, ClientDirect} {
				cl, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1", ProjectID: "plat", Concurrency: 1, Client: c})
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				tok := "ok-plat-" + c
				msg := &fanout.Message{Title: "t", Body: "b", Data: map[string]string{"top": "1"}, Delivery: tc.delivery, Platform: tc.plat}
				if tc.noNotice {
					msg.Title, msg.Body = "", ""
				}
				if out := send(t, cl, msg, tok, fanout.Budget{Max: 1}); out.Class != fanout.Success {
					t.Fatalf("%s: %+v", c, out)
				}
				got, ok := emu.LastMessage(tok)
				if !ok {
					t.Fatalf("%s: the emulator recorded no message for %s", c, tok)
				}
				m := decodeAny(t, got).(map[string]any)
				for _, k := range []string{"android", "apns", "webpush", "fcm_options"} {
					if !reflect.DeepEqual(m[k], tc.want[k]) {
						t.Errorf("%s: message.%s at FCM:\n got  %v\n want %v", c, k, m[k], tc.want[k])
					}
				}
				delete(m, "token")
				raw, _ := json.Marshal(m)
				bodies = append(bodies, raw)
			}
			if string(bodies[0]) != string(bodies[1]) {
				t.Fatalf("the clients sent different messages:\n sdk:    %s\n direct: %s", bodies[0], bodies[1])
			}
		})
	}
}

// A stored object the SDK's types cannot decode fails Prepare, before
// anything is sent.
func TestPrepareRefusesUndecodablePlatform(t *testing.T) {
	c, err := New(context.Background(), Options{Endpoint: "http://127.0.0.1:1/v1", ProjectID: "p", Client: ClientSDK})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Prepare(&fanout.Message{Body: "x", Platform: fanout.Platform{Android: json.RawMessage(`{"ttl":"soon"}`)}}); err == nil {
		t.Fatal("Prepare accepted android.ttl \"soon\"")
	}
}

func decodeAny(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}
