package server_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/cron"
	"pushfan/fcm"
	"pushfan/internal/testsupport/teststack"
)

// overrideBroadcast is the broadcast object with its stored message.
type overrideBroadcast struct {
	teststack.Broadcast
	Message map[string]any `json:"message"`
}

// lastMessage is the message object the emulator last received for tok.
func lastMessage(t *testing.T, s *teststack.Stack, tok string) map[string]any {
	t.Helper()
	raw, ok := s.Emu.LastMessage(tok)
	if !ok {
		t.Fatalf("the emulator received no message for %s", tok)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return m
}

func asJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("test setup: %s: %v", s, err)
	}
	return v
}

// The examples, pasted as an operator would, reach the emulator as
// FCM receives them, through both clients: normalized (priority "HIGH" is
// sent as the SDK's "high"), with pushfan's delivery defaults where the
// request sets none (docs/fcm.md): the display tag, a bulk broadcast's
// priority and lifetime, and no collapse key unless the request asks.
func TestPlatformOverridesReachTheEmulator(t *testing.T) {
	t.Parallel()
	for _, client := range []string{fcm.ClientSDK, fcm.ClientDirect} {
		t.Run(client, func(t *testing.T) {
			s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.FCMClient = client }})
			s.Emu.RecordMessages()
			s.SeedTokens(1, []string{"ok-a", "ok-b"})
			req := map[string]any{
				"title": "Sale", "body": "50% off", "audience": map[string]any{"all": true},
				"android":     asJSON(t, `{"priority":"HIGH","ttl":"600s","notification":{"channel_id":"promo","sound":"default","tag":"sale"}}`),
				"apns":        asJSON(t, `{"headers":{"apns-priority":"5"},"payload":{"aps":{"badge":3,"sound":"default"}}}`),
				"webpush":     asJSON(t, `{"fcm_options":{"link":"https://example.com/sale"}}`),
				"fcm_options": asJSON(t, `{"analytics_label":"x"}`),
			}
			var b overrideBroadcast
			if resp := s.Do("POST", "/push/broadcast", req, &b); resp.StatusCode != 200 || b.Status != "completed" || b.Succeeded != 2 || b.Failed != 0 {
				t.Fatalf("broadcast: %d %+v", resp.StatusCode, b)
			}
			key := fmt.Sprintf("pushfan-%d", b.ID)
			want := map[string]any{
				"android":     asJSON(t, `{"priority":"high","ttl":"600s","notification":{"channel_id":"promo","sound":"default","tag":"sale"}}`),
				"apns":        asJSON(t, `{"headers":{"apns-priority":"5","apns-collapse-id":"`+key+`"},"payload":{"aps":{"badge":3,"sound":"default"}}}`),
				"webpush":     asJSON(t, `{"headers":{"TTL":"2419200","Urgency":"normal"},"notification":{"tag":"`+key+`"},"fcm_options":{"link":"https://example.com/sale"}}`),
				"fcm_options": asJSON(t, `{"analytics_label":"x"}`),
			}
			for _, tok := range []string{"ok-a", "ok-b"} {
				if n := s.Emu.Counts(tok).Accepted; n != 1 {
					t.Fatalf("%s: accepted %d, want 1", tok, n)
				}
				m := lastMessage(t, s, tok)
				takeExpiration(t, m, b.CreatedAt.Add(28*24*time.Hour))
				for k, w := range want {
					if !reflect.DeepEqual(m[k], w) {
						t.Errorf("%s: message.%s at the emulator:\n got  %v\n want %v", tok, k, m[k], w)
					}
				}
			}
			// The broadcast object shows the stored, normalized objects.
			var got overrideBroadcast
			s.Do("GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &got)
			if a, _ := got.Message["android"].(map[string]any); a["priority"] != "high" || a["ttl"] != "600s" || a["collapse_key"] != nil {
				t.Fatalf("stored android: %v", got.Message["android"])
			}

			// The request's own collapse keys replace pushfan's.
			req["android"] = asJSON(t, `{"collapse_key":"sale-2026"}`)
			req["apns"] = asJSON(t, `{"headers":{"apns-collapse-id":"sale-ios"}}`)
			var b2 overrideBroadcast
			if resp := s.Do("POST", "/push/broadcast", req, &b2); resp.StatusCode != 200 || b2.Succeeded != 2 {
				t.Fatalf("second broadcast: %d %+v", resp.StatusCode, b2)
			}
			m := lastMessage(t, s, "ok-a")
			takeExpiration(t, m, b2.CreatedAt.Add(28*24*time.Hour))
			key2 := fmt.Sprintf("pushfan-%d", b2.ID)
			if !reflect.DeepEqual(m["android"], asJSON(t, `{"collapse_key":"sale-2026","priority":"normal","ttl":"2419200s","notification":{"tag":"`+key2+`"}}`)) ||
				!reflect.DeepEqual(m["apns"], asJSON(t, `{"headers":{"apns-collapse-id":"sale-ios","apns-priority":"5"}}`)) {
				t.Fatalf("the request's collapse keys: android %v, apns %v", m["android"], m["apns"])
			}
		})
	}
}

// Bad overrides are a 400 naming the path; nothing is sent.
func TestBadPlatformOverrides(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	s.SeedTokens(1, []string{"ok-a"})
	big := strings.Repeat("x", 4000)
	cases := []struct {
		name, key, value string
		code, field      string
	}{
		{"not an object", "android", `"high"`, "invalid_type", "android"},
		{"unknown android field", "android", `{"prority":"HIGH"}`, "unknown_field", "android.prority"},
		{"unknown notification field", "android", `{"notification":{"colour":"#ff0000"}}`, "unknown_field", "android.notification.colour"},
		{"priority", "android", `{"priority":"urgent"}`, "invalid_value", "android.priority"},
		{"ttl not a duration", "android", `{"ttl":"10m"}`, "invalid_value", "android.ttl"},
		{"ttl over 28 days", "android", `{"ttl":"2419201s"}`, "invalid_value", "android.ttl"},
		{"ttl negative", "android", `{"ttl":"-1s"}`, "invalid_value", "android.ttl"},
		{"ttl a number", "android", `{"ttl":600}`, "invalid_type", "android.ttl"},
		{"color", "android", `{"notification":{"color":"red"}}`, "invalid_value", "android.notification.color"},
		{"notification priority", "android", `{"notification":{"notification_priority":"HIGH"}}`, "invalid_value", "android.notification.notification_priority"},
		{"visibility", "android", `{"notification":{"visibility":"hidden"}}`, "invalid_value", "android.notification.visibility"},
		{"loc args without key", "android", `{"notification":{"body_loc_args":["a"]}}`, "invalid_value", "android.notification.body_loc_args"},
		{"light settings without color", "android", `{"notification":{"light_settings":{"light_on_duration":"1s"}}}`, "invalid_value", "android.notification.light_settings.color"},
		{"image not a URL", "android", `{"notification":{"image":"a.png"}}`, "invalid_value", "android.notification.image"},
		{"reserved data key", "android", `{"data":{"from":"x"}}`, "reserved_data_key", "android.data.from"},
		{"data value not a string", "android", `{"data":{"n":1}}`, "invalid_type", "android.data.n"},
		{"apns-priority", "apns", `{"headers":{"apns-priority":"7"}}`, "invalid_value", "apns.headers.apns-priority"},
		{"apns-priority a number", "apns", `{"headers":{"apns-priority":5}}`, "invalid_type", "apns.headers.apns-priority"},
		{"apns-push-type", "apns", `{"headers":{"apns-push-type":"push"}}`, "invalid_value", "apns.headers.apns-push-type"},
		{"unknown apns header", "apns", `{"headers":{"x-custom":"1"}}`, "unknown_field", "apns.headers.x-custom"},
		{"apns-collapse-id too long", "apns", `{"headers":{"apns-collapse-id":"` + strings.Repeat("c", 65) + `"}}`, "invalid_value", "apns.headers.apns-collapse-id"},
		{"negative badge", "apns", `{"payload":{"aps":{"badge":-1}}}`, "invalid_value", "apns.payload.aps.badge"},
		{"fractional badge", "apns", `{"payload":{"aps":{"badge":1.5}}}`, "invalid_value", "apns.payload.aps.badge"},
		{"unknown aps key", "apns", `{"payload":{"aps":{"colour":"red"}}}`, "unknown_field", "apns.payload.aps.colour"},
		{"unknown alert key", "apns", `{"payload":{"aps":{"alert":{"titel":"x"}}}}`, "unknown_field", "apns.payload.aps.alert.titel"},
		{"critical volume", "apns", `{"payload":{"aps":{"sound":{"critical":1,"name":"a","volume":2}}}}`, "invalid_value", "apns.payload.aps.sound.volume"},
		{"content-available", "apns", `{"payload":{"aps":{"content-available":true}}}`, "invalid_value", "apns.payload.aps.content-available"},
		{"link not https", "webpush", `{"fcm_options":{"link":"http://example.com/sale"}}`, "invalid_value", "webpush.fcm_options.link"},
		{"link missing", "webpush", `{"fcm_options":{}}`, "invalid_value", "webpush.fcm_options.link"},
		{"webpush analytics label (the SDK cannot carry it)", "webpush", `{"fcm_options":{"link":"https://e.com","analytics_label":"x"}}`, "unknown_field", "webpush.fcm_options.analytics_label"},
		{"urgency", "webpush", `{"headers":{"Urgency":"asap"}}`, "invalid_value", "webpush.headers.Urgency"},
		{"dir", "webpush", `{"notification":{"dir":"up"}}`, "invalid_value", "webpush.notification.dir"},
		{"analytics label", "fcm_options", `{"analytics_label":"has space"}`, "invalid_value", "fcm_options.analytics_label"},
		{"unknown fcm_options field", "fcm_options", `{"label":"x"}`, "unknown_field", "fcm_options.label"},
		{"template that does not parse", "android", `{"notification":{"title":"{{.x"}}`, "template_error", "android.notification.title"},
		{"template variable the audience lacks", "apns", `{"payload":{"deal":"{{.deal}}"}}`, "template_error", "apns.payload.deal"},
		{"templated link without a host", "webpush", `{"fcm_options":{"link":"https://{{.host}}/x"}}`, "invalid_value", "webpush.fcm_options.link"},
		{"payload over 4096 bytes with the overrides", "apns", `{"payload":{"custom":"` + big + `"}}`, "payload_too_large", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}, tc.key: asJSON(t, tc.value)}
			var e teststack.ErrorBody
			resp := s.Do("POST", "/push/broadcast", body, &e)
			if resp.StatusCode != 400 || e.Error.Code != tc.code || e.Error.Field != tc.field || e.Error.Message == "" {
				t.Fatalf("%s %s: %d %+v, want 400 %s naming %q", tc.key, tc.value, resp.StatusCode, e, tc.code, tc.field)
			}
		})
	}
	if n := s.Emu.Stats().Requests; n != 0 {
		t.Fatalf("the emulator got %d requests from refused broadcasts", n)
	}
}

// Templates render inside the overrides' strings, per user.
func TestPlatformOverrideTemplatesPerUser(t *testing.T) {
	t.Parallel()
	s := renewalStack(t)
	s.Emu.RecordMessages()
	var b overrideBroadcast
	s.Do("POST", "/push/broadcast", map[string]any{
		"title":    "Renewal",
		"audience": map[string]any{"name": "renewal_due", "params": map[string]any{"days_before": 3, "locale": "en"}},
		"android":  asJSON(t, `{"notification":{"title":"Your {{.plan}} plan","body_loc_key":"k","body_loc_args":["{{.amount}}"]}}`),
		"apns":     asJSON(t, `{"payload":{"aps":{"alert":{"title":"{{.plan}}"}},"plan":"{{.plan}}"}}`),
		"webpush":  asJSON(t, `{"fcm_options":{"link":"https://example.com/renew/{{.plan}}"}}`),
	}, &b)
	if b.Status != "completed" || b.Targeted != 20 || b.Succeeded != 20 {
		t.Fatalf("broadcast %+v", b.Broadcast)
	}
	for uid := 1; uid <= 20; uid++ {
		plan := "pro"
		if uid%5 == 0 {
			plan = "x"
		}
		tok := fmt.Sprintf("ok-%d", uid-1)
		m := lastMessage(t, s, tok)
		an := m["android"].(map[string]any)["notification"].(map[string]any)
		aps := m["apns"].(map[string]any)["payload"].(map[string]any)
		link := m["webpush"].(map[string]any)["fcm_options"].(map[string]any)["link"]
		if an["title"] != "Your "+plan+" plan" || !reflect.DeepEqual(an["body_loc_args"], []any{"9.90"}) ||
			aps["plan"] != plan || aps["aps"].(map[string]any)["alert"].(map[string]any)["title"] != plan ||
			link != "https://example.com/renew/"+plan {
			t.Fatalf("user %d (%s): android %v, apns %v, link %v", uid, plan, an, aps, link)
		}
	}
	if n := s.Emu.Stats().Accepted; n != 20 {
		t.Fatalf("the emulator accepted %d, want 20", n)
	}
}

// A cron job's message carries overrides, validated as the API's are.
func TestCronJobPlatformOverrides(t *testing.T) {
	t.Parallel()
	job := cron.Job{Name: "promo", Schedule: "0 9 * * MON", Audience: map[string]any{"all": true}, Message: cron.JobMessage{
		Title:   "promo",
		Android: map[string]any{"priority": "HIGH", "notification": map[string]any{"channel_id": "promo"}},
		APNS:    map[string]any{"headers": map[string]any{"apns-priority": "10"}},
	}}
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.InternalToken = internalToken
		c.Jobs = []cron.Job{job}
	}})
	s.Emu.RecordMessages()
	s.SeedTokens(1, []string{"ok-cron"})
	var fired struct {
		ID uint64 `json:"id"`
	}
	if resp := s.DoAuth("POST", "/internal/cron/promo", internalToken, `{"fire_time":"2026-01-05T09:00:00Z"}`, &fired); resp.StatusCode != 200 || fired.ID == 0 {
		t.Fatalf("fire: %d %+v", resp.StatusCode, fired)
	}
	if b := s.WaitFinished(fired.ID, 10*time.Second); b.Succeeded != 1 {
		t.Fatalf("fired broadcast %+v", b)
	}
	m := lastMessage(t, s, "ok-cron")
	// The job's own priority, pushfan's lifetime (a cron fire is bulk) and
	// display tag; no collapse key.
	want := asJSON(t, fmt.Sprintf(`{"priority":"high","ttl":"2419200s","notification":{"channel_id":"promo","tag":"pushfan-%d"}}`, fired.ID))
	if !reflect.DeepEqual(m["android"], want) || m["apns"].(map[string]any)["headers"].(map[string]any)["apns-priority"] != "10" {
		t.Fatalf("the job's message at the emulator: android %v, apns %v", m["android"], m["apns"])
	}

	// A bad override in a job is refused when the jobs are checked, naming
	// the job and the path (YAML's bare 5 is a number, not a header string).
	bad := job
	bad.Name = "bad"
	bad.Message.APNS = map[string]any{"headers": map[string]any{"apns-priority": 5}}
	compiled, err := cron.Compile([]cron.Job{bad})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Service.CheckJobs(compiled)
	if err == nil || !strings.Contains(err.Error(), "job bad") || !strings.Contains(err.Error(), "apns.headers.apns-priority") {
		t.Fatalf("CheckJobs: %v", err)
	}
}

// A templated link keeps the host its template fixes: a row whose value
// would move it to another host ("https://example.com" + "@evil.com/x")
// fails that target with TEMPLATE_ERROR, counted and never sent; a template
// whose first action is inside the host is refused with a 400 naming it.
func TestTemplatedLinksKeepTheirHost(t *testing.T) {
	t.Parallel()
	s := renewalStack(t)
	s.Emu.RecordMessages()
	// Users 5, 10, 15 and 20 hold a value that ends the host's user name.
	s.MustExec("UPDATE subscriptions SET plan = IF(user_id % 5 = 0, '@evil.com/x', '/renew')")
	aud := map[string]any{"name": "renewal_due", "params": map[string]any{"days_before": 3, "locale": "en"}}
	var b overrideBroadcast
	resp := s.Do("POST", "/push/broadcast", map[string]any{
		"title":    "Renewal",
		"audience": aud,
		"android":  asJSON(t, `{"notification":{"image":"https://img.example.com{{.plan}}"}}`),
		"webpush":  asJSON(t, `{"fcm_options":{"link":"https://example.com{{.plan}}"}}`),
	}, &b)
	if resp.StatusCode != 200 || b.Status != "completed" || b.Targeted != 20 || b.Succeeded != 16 || b.Failed != 4 || b.Errors["TEMPLATE_ERROR"] != 4 {
		t.Fatalf("broadcast: %d %+v", resp.StatusCode, b.Broadcast)
	}
	for uid := 1; uid <= 20; uid++ {
		tok := fmt.Sprintf("ok-%d", uid-1)
		if uid%5 == 0 {
			if raw, sent := s.Emu.LastMessage(tok); sent {
				t.Fatalf("user %d's link to another host was sent: %s", uid, raw)
			}
			continue
		}
		m := lastMessage(t, s, tok)
		image := m["android"].(map[string]any)["notification"].(map[string]any)["image"]
		link := m["webpush"].(map[string]any)["fcm_options"].(map[string]any)["link"]
		if image != "https://img.example.com/renew" || link != "https://example.com/renew" {
			t.Fatalf("user %d: image %v, link %v", uid, image, link)
		}
	}
	if n := s.Emu.Stats().Accepted; n != 16 {
		t.Fatalf("the emulator accepted %d, want 16", n)
	}
	var failures struct {
		Failures []struct {
			UserID  uint64 `json:"user_id"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"failures"`
	}
	s.Do("GET", fmt.Sprintf("/push/broadcasts/%d/failures", b.ID), nil, &failures)
	if len(failures.Failures) != 4 {
		t.Fatalf("failures: %+v", failures)
	}
	for _, f := range failures.Failures {
		if f.UserID%5 != 0 || f.Code != "TEMPLATE_ERROR" || !strings.Contains(f.Message, "android.notification.image") || !strings.Contains(f.Message, "img.example.com") {
			t.Fatalf("failure %+v", f)
		}
	}

	// The first action inside the host: no row could keep it.
	for _, c := range []struct{ key, value, field string }{
		{"webpush", `{"fcm_options":{"link":"https://api{{.plan}}.example.com/x"}}`, "webpush.fcm_options.link"},
		{"android", `{"notification":{"image":"https://example.com:{{.plan}}/x"}}`, "android.notification.image"},
		{"apns", `{"fcm_options":{"image":"https://cdn.{{.plan}}/x"}}`, "apns.fcm_options.image"},
	} {
		var e teststack.ErrorBody
		resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "Renewal", "audience": aud, c.key: asJSON(t, c.value)}, &e)
		if resp.StatusCode != 400 || e.Error.Code != "invalid_value" || e.Error.Field != c.field {
			t.Errorf("%s %s: %d %+v, want 400 invalid_value naming %s", c.key, c.value, resp.StatusCode, e, c.field)
		}
	}
	var n int
	if err := s.SQL.Get(&n, "SELECT COUNT(*) FROM broadcasts"); err != nil || n != 1 {
		t.Fatalf("%d broadcasts stored (err %v), want only the first", n, err)
	}
}

// takeExpiration checks that message m's apns-expiration is about want
// (it counts from when the chunk run built the message) and takes it out,
// so the rest compares exactly.
func takeExpiration(t *testing.T, m map[string]any, want time.Time) {
	t.Helper()
	apns, _ := m["apns"].(map[string]any)
	h, _ := apns["headers"].(map[string]any)
	v, _ := h["apns-expiration"].(string)
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || time.Unix(secs, 0).Sub(want).Abs() > time.Minute {
		t.Fatalf("apns-expiration %q, want about %v (%d)", v, want, want.Unix())
	}
	delete(h, "apns-expiration")
}
