package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"pushfan/broadcast/rules"
)

// fuzzMaxUserIDs is the PUSHFAN_MAX_USER_IDS the fuzz target validates with.
const fuzzMaxUserIDs = 10000

var snakeCode = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// FuzzBroadcastRequest feeds raw bodies to the POST /push/broadcast decoder
// and validator, the code every untrusted request body goes through before
// anything is stored or sent. Neither may panic; every refusal is an
// *APIError with a 4xx status, a snake_case code and a message; and whatever
// passes is a message FCM would take: not empty, no reserved data key, a
// payload within MaxPayloadBytes, one well-formed audience.
//
// Seeds: the f.Add calls below plus testdata/fuzz/FuzzBroadcastRequest.
// Run: go test -run '^$' -fuzz '^FuzzBroadcastRequest$' -fuzztime 30s ./server/
func FuzzBroadcastRequest(f *testing.F) {
	for _, seed := range []string{
		`{"title":"Hello","body":"from pushfan","audience":{"all":true}}`,
		`{"title":"t","image":"https://example.com/a.png","data":{"k":"v"},"audience":{"user_ids":[1,2,2,3]},"dry_run":true,"invalidate_on_dry_run":true,"wait":false}`,
		`{"data":{"from":"x"},"audience":{"all":true}}`,
		`{"data":{"google.x":"1","GCM.y":"2"},"audience":{"all":true}}`,
		`{"data":{"":"empty key"},"audience":{"all":true}}`,
		`{"title":"x","audience":{"all":true,"user_ids":[1]}}`,
		`{"title":"x","audience":{"user_ids":[]}}`,
		`{"title":"x","audience":{"user_ids":[0]}}`,
		`{"title":"x","audience":{"user_ids":[-1]}}`,
		`{"title":"x","audience":{"user_ids":[18446744073709551616]}}`,
		`{"title":"x","audience":{"user_ids":[1.5]}}`,
		`{"title":"x","audience":"all"}`,
		`{"title":"x"}`,
		`{"title":1,"audience":{"all":true}}`,
		`{"data":{"k":1},"audience":{"all":true}}`,
		`{"data":[],"audience":{"all":true}}`,
		`{"title":"x","audience":{"all":true},"extra":1}`,
		`{"title":"x","audience":{"all":true}} {"again":1}`,
		`{"title":"x","audience":{"all":true}}   `,
		`{"title":"x","image":"ftp://x","audience":{"all":true}}`,
		`{"title":"x","dry_run":false,"invalidate_on_dry_run":true,"audience":{"all":true}}`,
		`{"title":"\ud800","audience":{"all":true}}`,
		"{\"title\":\"\xff\xfe\",\"audience\":{\"all\":true}}",
		`{"title":"` + strings.Repeat("x", 4100) + `","audience":{"all":true}}`,
		`{"data":{"big":"` + strings.Repeat("é", 2040) + `"},"audience":{"all":true}}`,
		`{"title":"x","audience":{"all":true}`,
		`[]`, `null`, `"str"`, `42`, ``, `   `, `{`, `{}`, `{"title":null,"audience":null}`,
		`{"TITLE":"case-insensitive keys","AUDIENCE":{"ALL":true}}`,
		`{"title":"x","audience":{"all":true},"quiet_hours":false}`,
		`{"title":"x","audience":{"all":true},"quiet_hours":null}`,
		`{"title":"x","audience":{"all":true},"quiet_hours":true}`,
		`{"title":"x","audience":{"all":true},"quiet_hours":"22:00-08:00"}`,
		`{"title":"x","audience":{"user_ids":[1]},"quiet_hours":{"start":"22:00","end":"08:00"}}`,
		`{"title":"x","audience":{"all":true},"quiet_hours":{"start":22,"end":"08:00"}}`,
		`{"title":"x","audience":{"all":true},"quiet_hours":{"start":"22:00","end":"08:00","stop":1}}`,
		`{"title":"x","audience":{"all":true},"quiet_hours":{"start":"22:00"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req broadcastRequest
		if err := decodeStrict(bytes.NewReader(raw), &req); err != nil {
			checkAPIError(t, "decodeStrict", err)
			return
		}
		out, err := rules.Rules{MaxUserIDs: fuzzMaxUserIDs}.Validate(req.Spec, time.Time{})
		if err != nil {
			var fe *rules.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("the rules returned %T (%v), want *rules.FieldError", err, err)
			}
			checkAPIError(t, "validate", (&Server{}).toAPIError(err, nil))
			return
		}
		m := out.Message
		if m.Title == "" && m.Body == "" && len(m.Data) == 0 {
			t.Fatalf("validated an empty message from %q", raw)
		}
		if n := fuzzPayloadSize(t, m.Title, m.Body, m.Image, m.Data); n > rules.MaxPayloadBytes {
			t.Fatalf("validated a %d-byte payload (limit %d) from %q", n, rules.MaxPayloadBytes, raw)
		}
		for k := range m.Data {
			lk := strings.ToLower(k)
			if k == "" || lk == "from" || lk == "message_type" || lk == "notification" ||
				strings.HasPrefix(lk, "google.") || strings.HasPrefix(lk, "gcm.") {
				t.Fatalf("validated reserved data key %q from %q", k, raw)
			}
		}
		a := out.Audience
		if a.All == (len(a.UserIDs) > 0) {
			t.Fatalf("validated audience %+v (want exactly one of all and user_ids) from %q", a, raw)
		}
		if len(a.UserIDs) > fuzzMaxUserIDs {
			t.Fatalf("validated %d user ids (cap %d)", len(a.UserIDs), fuzzMaxUserIDs)
		}
		seen := map[uint64]bool{}
		for _, id := range a.UserIDs {
			if id == 0 || seen[id] {
				t.Fatalf("validated user ids %v (zero or duplicate) from %q", a.UserIDs, raw)
			}
			seen[id] = true
		}
		if out.InvalidateOnDryRun && !out.DryRun {
			t.Fatalf("validated invalidate_on_dry_run without dry_run from %q", raw)
		}
	})
}

func checkAPIError(t *testing.T, step string, err error) {
	t.Helper()
	apiErr, ok := err.(*APIError)
	if !ok {
		t.Fatalf("%s returned %T (%v), want *APIError", step, err, err)
	}
	if apiErr.Status < 400 || apiErr.Status > 499 {
		t.Fatalf("%s: status %d for %v, want 4xx", step, apiErr.Status, apiErr)
	}
	if !snakeCode.MatchString(apiErr.Code) {
		t.Fatalf("%s: code %q is not snake_case", step, apiErr.Code)
	}
	if strings.TrimSpace(apiErr.Message) == "" {
		t.Fatalf("%s: empty message for code %s", step, apiErr.Code)
	}
	// The error must reach the client as the documented JSON shape.
	body, mErr := json.Marshal(errorBody{Error: errorDetail{Code: apiErr.Code, Message: apiErr.Message, Field: apiErr.Field}})
	if mErr != nil || !json.Valid(body) {
		t.Fatalf("%s: error body does not marshal: %v", step, mErr)
	}
}

// fuzzPayloadSize measures the FCM payload independently of payloadSize: the
// compact JSON of {"data":...,"notification":...}.
func fuzzPayloadSize(t *testing.T, title, body, image string, data map[string]string) int {
	t.Helper()
	p := map[string]any{"data": data, "notification": nil}
	if data == nil {
		p["data"] = nil
	}
	if title != "" || body != "" || image != "" {
		n := map[string]string{}
		for k, v := range map[string]string{"title": title, "body": body, "image": image} {
			if v != "" {
				n[k] = v
			}
		}
		p["notification"] = n
	}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("marshalling the payload: %v", err)
	}
	return len(raw)
}
