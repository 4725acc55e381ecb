package fcm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"

	"pushfan/fanout"

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
//   - turning error responses into errors: classify reads the SDK's error
//     by the same classifyResponse, and a test sends every answer the
//     emulator can give through both clients and checks they agree.

// tokenPlaceholder stands for the token in an encoded message template; it
// cannot be a real token (FCM tokens have no '\x01').
const tokenPlaceholder = "\x01pushfan-token\x01"

// encodedPlaceholder is tokenPlaceholder as encoding/json writes it.
var encodedPlaceholder = []byte(`"\u0001pushfan-token\u0001"`)

// maxErrorBody caps how much of a response body is read.
const maxErrorBody = 64 << 10

// maxSuccessBody caps how much of a success body is kept for its name
// (FCM's is under 100 bytes).
const maxSuccessBody = 4 << 10

type directClient struct {
	client *http.Client
	url    string
	// header is shared by every request: an http.RoundTripper must not
	// modify the request (Google's auth transports clone it before adding
	// Authorization).
	header http.Header
	// h2, when not nil, carries the sends over HTTP/2 (h2pool.go) until
	// the server turns out not to speak it.
	h2 *h2Pool
	// h1, when not nil, carries the sends over HTTP/1.1 to a plain http://
	// endpoint (h1pool.go).
	h1 *h1Pool
}

func newDirectClient(client *http.Client, endpoint, projectID string) *directClient {
	return &directClient{
		client: client,
		url:    endpoint + "/projects/" + projectID + "/messages:send", // endpoint has no trailing slash
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

// StartTagged hands the request to the HTTP/2 client and returns without
// waiting for the answer (fanout.StartingPrepared): the engine waits from a
// shallow stack. Over net/http, the request is made in Wait.
func (p *directPrepared) StartTagged(ctx context.Context, token, tag string, _ fanout.Budget) fanout.Pending {
	if h2 := p.d.h2; h2 != nil && !h2.noH2.Load() {
		s, err := h2.start(ctx, p.body(token, tag))
		if err == nil {
			return s
		}
		if !errors.Is(err, errNoH2) {
			return &endedSend{out: outcome(ctx, h2Result{err: err})}
		}
	}
	if h1 := p.d.h1; h1 != nil {
		s, err := h1.start(ctx, p.body(token, tag))
		if err != nil {
			return &endedSend{out: outcome(ctx, h2Result{err: err})}
		}
		return s
	}
	return &netHTTPSend{p: p, token: token, tag: tag}
}

// Wait returns the outcome of the stream's request (fanout.Pending).
func (s *h2Stream) Wait(ctx context.Context) fanout.Outcome {
	return outcome(ctx, s.wait(ctx))
}

// endedSend is a send that ended before it was started.
type endedSend struct{ out fanout.Outcome }

func (e *endedSend) Wait(context.Context) fanout.Outcome { return e.out }

// netHTTPSend is a send over net/http, made in Wait.
type netHTTPSend struct {
	p          *directPrepared
	token, tag string
}

func (n *netHTTPSend) Wait(ctx context.Context) fanout.Outcome {
	return n.p.sendNetHTTP(ctx, n.token, n.tag)
}

// sendNetHTTP makes the request through net/http.
func (p *directPrepared) sendNetHTTP(ctx context.Context, token, tag string) fanout.Outcome {
	d := p.d
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(p.body(token, tag)))
	if err != nil {
		return fanout.Outcome{Class: fanout.Fatal, Code: CodeUnknown, Detail: err.Error(), Requests: 1}
	}
	req.Header = d.header
	resp, err := d.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fanout.Outcome{Class: fanout.Transient, Code: fanout.CodeTimeout, Detail: err.Error(), Requests: 1}
		}
		return fanout.Outcome{Class: fanout.Transient, Code: CodeNetwork, Detail: err.Error(), Requests: 1}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// FCM answers with a short {"name": ...}, the message id, as the
		// SDK's Send returns it. Read to the end so the connection is
		// reused; an endless body only costs its connection.
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxSuccessBody))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return fanout.Outcome{Class: fanout.Success, Requests: 1, MessageID: messageName(raw)}
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil && ctx.Err() != nil {
		return fanout.Outcome{Class: fanout.Transient, Code: fanout.CodeTimeout, Detail: err.Error(), Requests: 1}
	}
	out := classifyResponse(resp.StatusCode, resp.Header, raw)
	out.Requests = 1
	return out
}

// outcome classifies an answer of the HTTP/2 client as Send does
// net/http's.
func outcome(ctx context.Context, r h2Result) fanout.Outcome {
	switch {
	case r.err != nil && ctx.Err() != nil:
		return fanout.Outcome{Class: fanout.Transient, Code: fanout.CodeTimeout, Detail: r.err.Error(), Requests: 1}
	case r.err != nil:
		return fanout.Outcome{Class: fanout.Transient, Code: CodeNetwork, Detail: r.err.Error(), Requests: 1}
	case r.status >= 200 && r.status < 300:
		return fanout.Outcome{Class: fanout.Success, Requests: 1, MessageID: messageName(r.body)}
	}
	out := classifyResponse(r.status, r.header, r.body)
	out.Requests = 1
	return out
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
