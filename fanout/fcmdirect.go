package fanout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/messaging"
)

// The direct client sends the same HTTP v1 request as messaging.Client.Send,
// with the same headers, through the same authenticated and budgeted
// http.Client, but without re-encoding the message for every token: the
// body is encoded once per message by the SDK's own JSON encoding, with a
// placeholder where the token goes, and each send splices its token in.
//
// Measured on the 2-core bench box (BenchmarkSend, docs/PERFORMANCE.md),
// the SDK's per-send JSON encoding, request building and response decoding
// cost about a third of the client's CPU per send; FCM sends are CPU-bound
// on the client long before FCM's quota, so that third is throughput.
//
// What the SDK does beyond the request, and where it went:
//   - validating the message: the FCM endpoint validates it as well and
//     answers INVALID_ARGUMENT, which stops the broadcast (Fatal);
//   - retrying 503 and network errors: the engine retries them, with
//     backoff and the per-token attempt budget;
//   - turning error responses into errors: parseFCMError reads the same
//     google.rpc.Status body, and a test sends every error the emulator can
//     produce through both clients and checks they classify the same.

// tokenPlaceholder stands for the token in an encoded message template; it
// cannot be a real token (FCM tokens have no '\x01').
const tokenPlaceholder = "\x01pushfan-token\x01"

// encodedPlaceholder is tokenPlaceholder as encoding/json writes it.
var encodedPlaceholder = []byte(`"\u0001pushfan-token\u0001"`)

// maxErrorBody caps how much of a response body is read.
const maxErrorBody = 64 << 10

type directClient struct {
	client *http.Client
	url    string
	// header is shared by every request: an http.RoundTripper must not
	// modify the request (Google's auth transports clone it before adding
	// Authorization).
	header http.Header
}

func newDirectClient(client *http.Client, endpoint, projectID string) *directClient {
	return &directClient{
		client: client,
		url:    strings.TrimRight(endpoint, "/") + "/projects/" + projectID + "/messages:send",
		header: http.Header{
			"Content-Type":              {"application/json"},
			"X-Goog-Api-Format-Version": {"2"},
			"X-Firebase-Client":         {"fire-admin-go/" + firebase.Version},
			"X-Goog-Api-Client":         {"gl-go/" + strings.TrimPrefix(runtime.Version(), "go") + " fire-admin/" + firebase.Version},
		},
	}
}

// encodedBody is a message's request body cut at the token.
type encodedBody struct {
	prefix, suffix []byte
	err            error
}

// body returns the request body of msg for token.
func (m *Message) body(token string) ([]byte, error) {
	m.encOnce.Do(func() { m.enc = encodeTemplate(m) })
	if m.enc.err != nil {
		return nil, m.enc.err
	}
	b := make([]byte, 0, len(m.enc.prefix)+len(token)+2+len(m.enc.suffix))
	b = append(b, m.enc.prefix...)
	b = appendJSONToken(b, token)
	return append(b, m.enc.suffix...), nil
}

func encodeTemplate(m *Message) encodedBody {
	tmpl := m.fcmTemplate()
	tmpl.Token = tokenPlaceholder
	req := struct {
		ValidateOnly bool               `json:"validate_only,omitempty"`
		Message      *messaging.Message `json:"message,omitempty"`
	}{ValidateOnly: m.DryRun, Message: &tmpl}
	raw, err := json.Marshal(req)
	if err != nil {
		return encodedBody{err: fmt.Errorf("fcm: encoding the message: %w", err)}
	}
	i := bytes.Index(raw, encodedPlaceholder)
	if i < 0 || bytes.Count(raw, encodedPlaceholder) != 1 {
		return encodedBody{err: errors.New("fcm: the encoded message does not hold the token exactly once")}
	}
	return encodedBody{prefix: raw[:i], suffix: raw[i+len(encodedPlaceholder):]}
}

// appendJSONToken appends token as a JSON string. Real tokens are plain
// ASCII and are copied as they are; anything else goes through
// encoding/json.
func appendJSONToken(b []byte, token string) []byte {
	for i := 0; i < len(token); i++ {
		if c := token[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(token) // a string always encodes
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, token...)
	return append(b, '"')
}

func (d *directClient) send(ctx context.Context, msg *Message, token string) error {
	body, err := msg.body(token)
	if err != nil {
		return &SendError{Class: Fatal, Code: CodeInvalidArg, Detail: err.Error(), Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		return &SendError{Class: Fatal, Code: CodeUnknown, Detail: err.Error(), Err: err}
	}
	req.Header = d.header
	resp, err := d.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // the engine reads the cause (timeout, budget)
		}
		return &SendError{Class: Transient, Code: CodeNetwork, Detail: err.Error(), Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// Read to the end so the connection is reused (FCM answers with a
		// short {"name": ...}); an endless body only costs its connection.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	se := parseFCMError(resp.StatusCode, resp.Header, raw)
	return &se
}

// parseFCMError classifies an error response exactly as Classify does the
// SDK's error for it: by the FcmError detail's errorCode first, then by the
// google.rpc status (or, without a body, the HTTP status).
func parseFCMError(status int, h http.Header, body []byte) SendError {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
			Details []struct {
				Type      string `json:"@type"`
				ErrorCode string `json:"errorCode"`
			} `json:"details"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e) // a body that is not Status JSON classifies by HTTP status
	fcmCode := ""
	for _, d := range e.Error.Details {
		if d.Type == "type.googleapis.com/google.firebase.fcm.v1.FcmError" {
			fcmCode = d.ErrorCode
			break
		}
	}
	platform := e.Error.Status
	if platform == "" {
		platform = statusFromHTTP(status)
	}
	detail := e.Error.Message
	if detail == "" {
		detail = "unexpected http response with status: " + strconv.Itoa(status) + "\n" + string(body)
	}
	retry := retryAfterHeader(h)
	out := func(c Class, code string) SendError {
		se := SendError{Class: c, Code: code, Detail: detail, Err: &HTTPError{Status: status, Body: string(body)}}
		switch code {
		case CodeQuota, CodeUnavailable, CodeInternal: // the ones Classify reads it for
			se.RetryAfter = retry
		}
		return se
	}
	switch {
	case fcmCode == CodeUnregistered:
		return out(Dead, CodeUnregistered)
	case fcmCode == CodeMismatch:
		return out(Dead, CodeMismatch)
	case fcmCode == CodeInvalidArg:
		if isTokenCause(detail) {
			return out(Dead, CodeInvalidArg)
		}
		return out(Fatal, CodeInvalidArg)
	case fcmCode == CodeQuota, platform == "RESOURCE_EXHAUSTED":
		return out(Transient, CodeQuota)
	case fcmCode == CodeUnavailable:
		return out(Transient, CodeUnavailable)
	case fcmCode == CodeInternal:
		return out(Transient, CodeInternal)
	case fcmCode == CodeThirdParty, fcmCode == "APNS_AUTH_ERROR":
		return out(Fatal, CodeThirdParty)
	case platform == CodeUnauthorized:
		return out(Fatal, CodeUnauthorized)
	case platform == CodeForbidden:
		return out(Fatal, CodeForbidden)
	case platform == CodeNotFound:
		return out(Fatal, CodeNotFound)
	}
	return out(Transient, CodeUnknown)
}

// statusFromHTTP is the google.rpc code the SDK assumes for an HTTP status
// when the body names none.
func statusFromHTTP(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return "CONFLICT"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusInternalServerError:
		return CodeInternal
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	}
	return "UNKNOWN"
}

// HTTPError is the response behind a SendError from the direct client.
type HTTPError struct {
	Status int
	Body   string
}

func (e *HTTPError) Error() string {
	return "fcm: HTTP " + strconv.Itoa(e.Status) + ": " + e.Body
}
