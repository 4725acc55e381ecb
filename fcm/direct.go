package fcm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"

	"pushfan/fanout"
	"pushfan/fcm/transport"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/messaging"
)

// The direct client sends the same HTTP v1 request as messaging.Client.Send,
// with the same headers, over fcm/transport's HTTP/2 or HTTP/1.1 client or
// the SDK's own authenticated and budgeted http.Client (transport.Options:
// Fallback), but without re-encoding the message for every token: the
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
//   - turning error responses into errors: classify reads the SDK's error
//     by the same classifyResponse, and a test sends every answer the
//     emulator can give through both clients and checks they agree.

// tokenPlaceholder stands for the token in an encoded message template; it
// cannot be a real token (FCM tokens have no '\x01').
const tokenPlaceholder = "\x01pushfan-token\x01"

// encodedPlaceholder is tokenPlaceholder as encoding/json writes it.
var encodedPlaceholder = []byte(`"\u0001pushfan-token\u0001"`)

type directClient struct {
	url string
	// header is shared by every request: an http.RoundTripper must not
	// modify the request (Google's auth transports clone it before adding
	// Authorization).
	header http.Header
	// tr carries the requests and classifies their answers (outcome).
	tr *transport.Client[fanout.Outcome]
}

func newDirectClient(endpoint, projectID string) *directClient {
	return &directClient{
		url: endpoint + "/projects/" + projectID + "/messages:send", // endpoint has no trailing slash
		header: http.Header{
			"Content-Type":              {"application/json"},
			"X-Goog-Api-Format-Version": {"2"},
			"X-Firebase-Client":         {"fire-admin-go/" + firebase.Version},
			"X-Goog-Api-Client":         {"gl-go/" + strings.TrimPrefix(runtime.Version(), "go") + " fire-admin/" + firebase.Version},
		},
	}
}

// encodedTag is fanout.TagPlaceholder as encoding/json writes it inside a
// string: where a send's tag goes (a data value, a link). The tag is
// spliced in as it is: event tokens are URL-safe, needing no escape.
var encodedTag = []byte(`\u0001pushfan-tag\u0001`)

// directPrepared is a message's request body cut at its holes: lits[0]
// hole[0] lits[1] ... lits[n]. The token's hole is a JSON string; a tag's
// is the inside of one.
type directPrepared struct {
	d     *directClient
	lits  [][]byte
	holes []hole
}

type hole uint8

const (
	holeToken hole = iota
	holeTag
)

// prepare encodes the request for tmpl once, with a placeholder token, and
// finds the token and (for a tagged message) every fanout.TagPlaceholder.
func (d *directClient) prepare(tmpl messaging.Message, dryRun, tagged bool) (*directPrepared, error) {
	tmpl.Token = tokenPlaceholder
	req := struct {
		ValidateOnly bool               `json:"validate_only,omitempty"`
		Message      *messaging.Message `json:"message,omitempty"`
	}{ValidateOnly: dryRun, Message: &tmpl}
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("fcm: encoding the message: %w", err)
	}
	if bytes.Count(raw, encodedPlaceholder) != 1 {
		return nil, errors.New("fcm: the encoded message does not hold the token exactly once")
	}
	if tagged && !bytes.Contains(raw, encodedTag) {
		return nil, errors.New("fcm: a tagged message holds no tag placeholder")
	}
	p := &directPrepared{d: d}
	for {
		i := bytes.Index(raw, encodedPlaceholder)
		j := -1
		if tagged {
			j = bytes.Index(raw, encodedTag)
		}
		switch {
		case i < 0 && j < 0:
			p.lits = append(p.lits, raw)
			return p, nil
		case j < 0 || (i >= 0 && i < j):
			p.lits, p.holes = append(p.lits, raw[:i]), append(p.holes, holeToken)
			raw = raw[i+len(encodedPlaceholder):]
		default:
			p.lits, p.holes = append(p.lits, raw[:j]), append(p.holes, holeTag)
			raw = raw[j+len(encodedTag):]
		}
	}
}

// body returns the request body for token and tag.
func (p *directPrepared) body(token, tag string) []byte {
	n := len(token) + 2
	for _, l := range p.lits {
		n += len(l)
	}
	for _, h := range p.holes {
		if h == holeTag {
			n += len(tag)
		}
	}
	b := make([]byte, 0, n)
	for i, h := range p.holes {
		b = append(b, p.lits[i]...)
		if h == holeToken {
			b = appendJSONToken(b, token)
		} else {
			b = append(b, tag...)
		}
	}
	return append(b, p.lits[len(p.lits)-1]...)
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

// Send makes one attempt: exactly one HTTP request (the engine retries).
func (p *directPrepared) Send(ctx context.Context, token string, b fanout.Budget) fanout.Outcome {
	return p.SendTagged(ctx, token, "", b)
}

// SendTagged is Send with the message's tag set to tag.
func (p *directPrepared) SendTagged(ctx context.Context, token, tag string, b fanout.Budget) fanout.Outcome {
	return p.StartTagged(ctx, token, tag, b).Wait(ctx)
}

// StartTagged hands the request to the transport and returns without
// waiting for the answer (fanout.StartingPrepared): the engine waits from a
// shallow stack. Over net/http, the request is made in Wait.
func (p *directPrepared) StartTagged(ctx context.Context, token, tag string, _ fanout.Budget) fanout.Pending {
	return p.d.tr.Start(ctx, p.body(token, tag))
}

// outcome classifies the transport's answer to a send as Classify does
// the SDK's error for the same answer; the transport calls it at the end of
// a send's Wait.
func outcome(ctx context.Context, r transport.Result) fanout.Outcome {
	switch {
	case r.Err != nil:
		return errorOutcome(ctx, r.Err)
	case r.Status >= 200 && r.Status < 300:
		return fanout.Outcome{Class: fanout.Success, Requests: 1, MessageID: messageName(r.Body)}
	}
	out := classifyResponse(r.Status, r.Header, r.Body)
	out.Requests = 1
	return out
}

// errorOutcome is the outcome of a send that got no answer. (Its own
// function: the target errors.As takes is allocated, and a success does
// not pay for it.)
func errorOutcome(ctx context.Context, err error) fanout.Outcome {
	var bad *transport.RequestError
	switch {
	case errors.As(err, &bad):
		return fanout.Outcome{Class: fanout.Fatal, Code: CodeUnknown, Detail: err.Error(), Requests: 1}
	case ctx.Err() != nil:
		return fanout.Outcome{Class: fanout.Transient, Code: fanout.CodeTimeout, Detail: err.Error(), Requests: 1}
	}
	return fanout.Outcome{Class: fanout.Transient, Code: CodeNetwork, Detail: err.Error(), Requests: 1}
}

// messageName returns the "name" of a success body, as the SDK reads it
// (json.Unmarshal into {"name": string}); "" when the body has none. FCM's
// body is that one member with a plain string, read here without
// reflection (this runs for every accepted send); anything else goes
// through encoding/json.
func messageName(raw []byte) string {
	rest := raw
	eat := func(token string) bool {
		var ok bool
		rest, ok = bytes.CutPrefix(bytes.TrimLeft(rest, " \t\r\n"), []byte(token))
		return ok
	}
	if eat("{") && eat(`"name"`) && eat(":") && eat(`"`) {
		if end := bytes.IndexByte(rest, '"'); end >= 0 && bytes.IndexByte(rest[:end], '\\') < 0 {
			name := rest[:end]
			rest = rest[end+1:]
			if eat("}") && len(bytes.TrimLeft(rest, " \t\r\n")) == 0 {
				return string(name)
			}
		}
	}
	var r struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return ""
	}
	return r.Name
}
