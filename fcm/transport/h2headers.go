package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
)

// The HTTP/2 client sends every request with one header block, encoded
// once: the same header set net/http sends for the same request through
// Options.Fallback (Options.Header, the User-Agent net/http adds, and
// whatever the authenticated transport adds, Authorization above all),
// less Accept-Encoding: net/http asks for gzip only to undo it itself, and
// the answers are kept to a few KB anyway (FCM's are a few hundred bytes). Only content-length is encoded per
// request.
//
// Every field is encoded "never indexed": the block leaves the server's
// HPACK dynamic table alone, so one encoding serves every connection and
// every request, and a header block costs a copy.

// authRefresh is how often the headers of the authenticated transport are
// taken again. Google's token sources renew a token at least 10 s before it
// expires, so a block taken at most this long ago carries a valid token.
const authRefresh = 5 * time.Second

// netHTTPUserAgent is the User-Agent net/http sends for a request without
// one (fcm's direct and SDK clients set none).
const netHTTPUserAgent = "Go-http-client/2.0"

// headerBlock is an HPACK-encoded header block and when to take it again.
type headerBlock struct {
	block     []byte
	refreshAt time.Time // zero: never
}

// h2Headers hands out the header block of a send.
type h2Headers struct {
	pseudo []hpack.HeaderField
	header http.Header // Options.Header
	// auth, when not nil, is the authenticated transport; a request sent
	// through it withHeaderRecorder comes back with the headers it would
	// have carried (Options.Fallback's requests do).
	auth    http.RoundTripper
	authURL *url.URL

	cur     atomic.Pointer[headerBlock]
	refresh sync.Mutex
}

func newH2Headers(u *url.URL, header http.Header, auth http.RoundTripper) *h2Headers {
	path := u.EscapedPath()
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	scheme := "https"
	if u.Scheme == "http" {
		scheme = "http"
	}
	h := &h2Headers{
		pseudo: []hpack.HeaderField{
			{Name: ":authority", Value: u.Host},
			{Name: ":method", Value: http.MethodPost},
			{Name: ":path", Value: path},
			{Name: ":scheme", Value: scheme},
		},
		header: header, auth: auth, authURL: u,
	}
	if auth == nil {
		h.cur.Store(&headerBlock{block: h.encode(header)})
	}
	return h
}

// encode is the block for a request with header: its fields in a stable
// order, lower-cased, and the User-Agent net/http adds when there is none.
func (h *h2Headers) encode(header http.Header) []byte {
	fields := append([]hpack.HeaderField(nil), h.pseudo...)
	keys := make([]string, 0, len(header))
	for k := range header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range header[k] {
			fields = append(fields, hpack.HeaderField{Name: strings.ToLower(k), Value: v})
		}
	}
	if header.Get("User-Agent") == "" {
		fields = append(fields, hpack.HeaderField{Name: "user-agent", Value: netHTTPUserAgent})
	}
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, f := range fields {
		f.Sensitive = true    // never indexed (see above)
		_ = enc.WriteField(f) // writes to a bytes.Buffer do not fail
	}
	return buf.Bytes()
}

// block returns the header block for a send now.
func (h *h2Headers) block(ctx context.Context) ([]byte, error) {
	b := h.cur.Load()
	if b != nil && (b.refreshAt.IsZero() || time.Now().Before(b.refreshAt)) {
		return b.block, nil
	}
	if b != nil && !h.refresh.TryLock() {
		return b.block, nil // another send is taking it again
	}
	if b == nil {
		h.refresh.Lock()
		if b = h.cur.Load(); b != nil {
			h.refresh.Unlock()
			return b.block, nil
		}
	}
	defer h.refresh.Unlock()
	nb, err := h.capture(ctx)
	if err != nil {
		return nil, err
	}
	h.cur.Store(nb)
	return nb.block, nil
}

// capture runs a request with Options.Header through the
// authenticated transport and encodes the headers it comes out with.
func (h *h2Headers) capture(ctx context.Context) (*headerBlock, error) {
	req, err := http.NewRequestWithContext(withHeaderRecorder(ctx), http.MethodPost, h.authURL.String(), http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("fcm: authenticating: %w", err)
	}
	req.Header = h.header.Clone()
	resp, err := h.auth.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("fcm: authenticating: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The recorder answers with the request's headers as they reached it.
	return &headerBlock{block: h.encode(resp.Header), refreshAt: time.Now().Add(authRefresh)}, nil
}

// headerRecorder is the base of the authenticated transport whose headers
// the HTTP/2 client takes: it answers every request with 204 and the
// request's own headers, and sends nothing.
type headerRecorder struct{}

func (headerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusNoContent,
		Header:     req.Header.Clone(),
		Body:       http.NoBody,
		Request:    req,
	}, nil
}

type recordKey struct{}

// withHeaderRecorder marks a request whose headers are to be recorded.
func withHeaderRecorder(ctx context.Context) context.Context {
	return context.WithValue(ctx, recordKey{}, true)
}

// HeaderRecorder is the base an authenticating http.RoundTripper given as
// Options.Auth sits on: it records the requests the HTTP/2 client marks
// (headerRecorder), and sends every other request through send, so that
// the same authenticated transport also serves net/http's requests.
func HeaderRecorder(send http.RoundTripper) http.RoundTripper {
	return &recordOrSend{send: send}
}

// recordOrSend is HeaderRecorder's transport.
type recordOrSend struct{ send http.RoundTripper }

func (t *recordOrSend) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Context().Value(recordKey{}) != nil {
		return headerRecorder{}.RoundTrip(req)
	}
	return t.send.RoundTrip(req)
}
