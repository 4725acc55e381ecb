package fcm

import (
	"net/http"
	"testing"
	"time"

	"pushfan/fanout"
)

// FuzzClassifyResponse feeds arbitrary error responses to the classifier both
// FCM clients share: it must never panic, always name a code, and only give a
// server-requested wait to the retryable codes.
func FuzzClassifyResponse(f *testing.F) {
	f.Add(404, "", []byte(`{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}`))
	f.Add(429, "30", []byte(`{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED"}]}}`))
	f.Add(400, "", []byte(`{"error":{"code":400,"message":"The registration token is not a valid FCM registration token","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"}]}}`))
	f.Add(503, "Wed, 21 Oct 2015 07:28:00 GMT", []byte(`<html>busy</html>`))
	f.Add(502, "", []byte(``))
	f.Add(429, "99999999999999999", []byte(`{"error":{"status":"RESOURCE_EXHAUSTED"}}`))
	f.Add(500, "-1", []byte(`{"error":{"details":[{"@type":1}]}}`))
	f.Fuzz(func(t *testing.T, status int, retryAfter string, body []byte) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		se := classifyResponse(status, h, body)
		if se.Code == "" {
			t.Fatalf("no code for %d %q", status, body)
		}
		if se.Class == fanout.Success {
			t.Fatalf("an error response classified as success: %d %q", status, body)
		}
		switch se.Code {
		case fanout.CodeQuota, CodeUnavailable, CodeInternal:
		default:
			if se.RetryAfter != 0 {
				t.Fatalf("%s carries a Retry-After of %v", se.Code, se.RetryAfter)
			}
		}
		if se.RetryAfter < 0 || se.RetryAfter > maxRetryAfterSeconds*time.Second {
			t.Fatalf("retry after %v", se.RetryAfter)
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		"-3":                            0,
		"soon":                          0,
		"Sun, 29 Nov 2026 12:00:30 GMT": 30 * time.Second,
		"Sun, 29 Nov 2026 11:00:00 GMT": 0,
		"99999999999999999":             24 * time.Hour, // would overflow time.Duration
		"86400":                         24 * time.Hour,
		"Fri, 31 Dec 9999 23:59:59 GMT": 24 * time.Hour,
	}
	for in, want := range cases {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}
