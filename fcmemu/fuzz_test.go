package fcmemu

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fuzzSendSeeds are request bodies for both fuzz targets: valid sends, every
// rejection rule, the token prefixes, and malformed JSON.
func fuzzSendSeeds() []string {
	return []string{
		`{"message":{"token":"cTok3n:APA91b-abc_def.ghi","notification":{"title":"t","body":"b"}}}`,
		`{"message":{"token":"ok-token","data":{"k":"v"}},"validate_only":true}`,
		`{"message":{"token":"ok-token"},"validateOnly":true}`,
		`{"message":{"topic":"/topics/news"}}`,
		`{"message":{"topic":"bad topic!"}}`,
		`{"message":{"condition":"'a' in topics"}}`,
		`{"message":{"token":"a","topic":"b"}}`,
		`{"message":{"token":""}}`,
		`{"message":{}}`,
		`{"message":null}`,
		`{}`,
		`{"message":{"token":"invalid-x"}}`,
		`{"message":{"token":"has space"}}`,
		`{"message":{"token":123}}`,
		`{"message":{"token":"t","data":{"from":"x"}}}`,
		`{"message":{"token":"t","data":{"google.x":"x","gcm.y":"y"}}}`,
		`{"message":{"token":"t","data":{"n":1}}}`,
		`{"message":{"token":"t","data":{"n":null}}}`,
		`{"message":{"token":"t","data":[]}}`,
		`{"message":{"token":"t","data":{"big":"` + strings.Repeat("x", 4100) + `"}}}`,
		`{"message":{"token":"t","notification":{"body":"` + strings.Repeat("y", 4100) + `"}}}`,
		`{"message":{"token":"t","notification":` + strings.Repeat("[", 2000) + `}}`,
		`{"message":{"token":"unregistered-1"}}`,
		`{"message":{"token":"unavailable-1"}}`,
		`{"message":{"token":"mismatch-1"}}`,
		`{"message":{"token":"quota-1"}}`,
		`{"message":{"token":"internal-1"}}`,
		`{"message":{"token":"auth-1"}}`,
		`{"message":{"token":"hang-1"}}`,
		`{"message":{"token":"flaky2xunavailable-1"}}`,
		`{"message":{"token":"flaky1xinvalid-1"}}`,
		`{"message":{"token":"flaky999999999999xhang-1"}}`,
		`{"message":{"token":"t"}} trailing`,
		`{"message":{"token":"t"`,
		`[1,2]`, `null`, `""`, ``, `{"message":{"token":"\ud800"}}`,
		"{\"message\":{\"token\":\"\xff\"}}",
	}
}

// FuzzParseSend fuzzes the emulator's send-request parser and validator
// directly: it must not panic, every rejection carries a message, and an
// accepted request names exactly one valid target.
//
// Seeds: fuzzSendSeeds plus testdata/fuzz/FuzzParseSend.
// Run: go test -run '^$' -fuzz '^FuzzParseSend$' -fuzztime 30s ./fcmemu/
func FuzzParseSend(f *testing.F) {
	for _, s := range fuzzSendSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := parseSend(body)
		if p.reject != nil {
			if p.reject.msg == "" {
				t.Fatalf("rejection without a message for %q", body)
			}
			return
		}
		if p.hasToken && (p.token == "" || !validToken(p.token)) {
			t.Fatalf("accepted invalid token %q from %q", p.token, body)
		}
		var req sendRequest
		if err := json.Unmarshal(body, &req); err != nil || req.Message == nil {
			t.Fatalf("accepted %q, which does not decode (%v) or has no message", body, err)
		}
		if p.hasToken != (req.Message.Token != nil) {
			t.Fatalf("hasToken %v but token field present %v in %q", p.hasToken, req.Message.Token != nil, body)
		}
	})
}

// FuzzSendHandler drives arbitrary bodies and project ids through the
// emulator's real HTTP handler: it must not panic, must answer one of the
// statuses FCM uses, a google.rpc.Status JSON body on every error whose code
// matches the HTTP status, a parseable {"name":"projects/P/messages/..."} on
// success, and a 400 for every request the parser rejects.
//
// Seeds: fuzzSendSeeds plus testdata/fuzz/FuzzSendHandler.
// Run: go test -run '^$' -fuzz '^FuzzSendHandler$' -fuzztime 30s ./fcmemu/
func FuzzSendHandler(f *testing.F) {
	for i, s := range fuzzSendSeeds() {
		project := []string{"demo", "my-project-123", "p\"q\\r", "ünï", "a b"}[i%5]
		f.Add(project, []byte(s))
	}
	allowed := map[int]bool{200: true, 400: true, 401: true, 403: true, 404: true, 429: true, 500: true, 503: true}
	f.Fuzz(func(t *testing.T, project string, body []byte) {
		if project == "" || project == "." || project == ".." {
			t.Skip("an empty or dot segment is cleaned by ServeMux into a redirect before the emulator sees it")
		}
		// A fresh emulator per input: independent answers, no growth across
		// inputs. hang- tokens give up at once and answer 503.
		e := New(Config{HangMax: time.Millisecond}, nil)
		target := "/v1/projects/" + url.PathEscape(project) + "/messages:send"
		req := httptest.NewRequest(http.MethodPost, "http://fcm.test"+target, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.Handler().ServeHTTP(rec, req)

		status := rec.Code
		if !allowed[status] {
			t.Fatalf("status %d for project %q body %q; body %s", status, project, body, rec.Body.Bytes())
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("status %d with Content-Type %q", status, ct)
		}
		if status == http.StatusOK {
			var ok struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &ok); err != nil {
				t.Fatalf("success body %q is not JSON: %v (project %q)", rec.Body.Bytes(), err, project)
			}
			want := "projects/" + project + "/messages/"
			if utf8.ValidString(project) && !strings.HasPrefix(ok.Name, want) {
				t.Fatalf("success name %q, want prefix %q", ok.Name, want)
			}
		} else {
			var st statusBody
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
				t.Fatalf("status %d body %q is not a google.rpc.Status: %v", status, rec.Body.Bytes(), err)
			}
			if st.Error.Code != status || st.Error.Status == "" || st.Error.Message == "" {
				t.Fatalf("status %d with google.rpc.Status %+v", status, st.Error)
			}
		}
		// serveSend counts every request it gets; 0 means ServeMux routed the
		// URL elsewhere. It does so for a project segment that is only an
		// escaped slash ("%2F"; "a%2Fb" does reach the send route): a
		// net/http routing quirk, harmless because project ids have no '/'.
		// The catch-all must then answer 404 NOT_FOUND.
		switch got := e.Stats().Requests; got {
		case 0:
			if status != http.StatusNotFound {
				t.Fatalf("project %q did not reach the send route, yet the answer is %d", project, status)
			}
		case 1:
			if p := parseSend(body); p.reject != nil && status != http.StatusBadRequest {
				t.Fatalf("parser rejects %q (%s) but the handler answered %d", body, p.reject.msg, status)
			}
		default:
			t.Fatalf("the emulator counted %d requests for one send", got)
		}
	})
}
