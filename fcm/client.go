// Package fcm is pushfan's FCM HTTP v1 client: the firebase Admin SDK path
// (messaging.Client.Send), the direct client that encodes each message once
// and splices tokens in (byte-identical requests, checked by a test), the
// transport that holds the SDK's own retries to the engine's per-token
// budget, and the one classifier of FCM's answers. It implements
// fanout.Sender; the engine sees only classified outcomes. The HTTP/1.1
// and HTTP/2 clients the direct client sends over, and the pool of
// net/http transports both clients share, are fcm/transport's.
package fcm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"pushfan/fanout"
	"pushfan/fcm/transport"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/messaging"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"
)

// Options says where and how to reach FCM.
type Options struct {
	// Endpoint is the FCM base URL; empty means Google's. A non-empty
	// endpoint is an emulator: no credentials are used.
	Endpoint        string
	ProjectID       string
	CredentialsFile string // service-account JSON, for real FCM
	CAFile          string // extra PEM roots to trust (an emulator's self-signed CA)
	// H2C speaks HTTP/2 without TLS to an http:// endpoint (emulator only).
	H2C bool
	// Concurrency sizes the connection pool so that N concurrent sends do
	// not churn connections (the SDK's default keeps 100 idle per host).
	Concurrency int
	// Client picks how requests are made: ClientDirect (the default) or
	// ClientSDK. Both send the same HTTP v1 request over the same transport.
	Client string
	// HTTP2 picks the direct client's HTTP clients: HTTP2Pushfan (the
	// default: fcm/transport's HTTP/2 client, and its HTTP/1.1 client for
	// a plain http:// endpoint) or HTTP2NetHTTP (net/http's, as the SDK
	// uses).
	HTTP2 string
	// Log gets the client's warnings; nil discards them.
	Log *slog.Logger
}

// The direct client's two HTTP/2 clients.
const (
	// HTTP2Pushfan sends over pushfan's own HTTP/2 client (fcm/transport).
	HTTP2Pushfan = "pushfan"
	// HTTP2NetHTTP sends over net/http's HTTP/2 client.
	HTTP2NetHTTP = "net/http"
)

// defaultFCMEndpoint is Google's FCM HTTP v1 base URL (the SDK's default).
const defaultFCMEndpoint = "https://fcm.googleapis.com/v1"

// The two ways Client can send.
const (
	// ClientDirect posts a body encoded once per message (direct.go).
	ClientDirect = "direct"
	// ClientSDK calls messaging.Client.Send for every token.
	ClientSDK = "sdk"
)

// Client sends one HTTP v1 request per token, through the firebase Admin
// SDK's messaging.Client.Send or the direct client (direct.go).
type Client struct {
	client    *messaging.Client
	direct    *directClient // nil: use client
	transport *transport.ConnPool
	projectID string
}

// ProjectID is the Firebase project the client sends to (the rate budget
// is this project's).
func (c *Client) ProjectID() string { return c.projectID }

// New builds the client on a transport sized for o.Concurrency, wrapped by
// the attempt-budget transport (see attempts.go).
func New(ctx context.Context, o Options) (*Client, error) {
	switch o.Client {
	case "", ClientDirect, ClientSDK:
	default:
		return nil, fmt.Errorf("fcm: client must be %q or %q, got %q", ClientDirect, ClientSDK, o.Client)
	}
	switch o.HTTP2 {
	case "", HTTP2Pushfan, HTTP2NetHTTP:
	default:
		return nil, fmt.Errorf("fcm: HTTP/2 client must be %q or %q, got %q", HTTP2Pushfan, HTTP2NetHTTP, o.HTTP2)
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	plain, err := transport.NewHTTPTransport(o.CAFile, o.H2C, o.Concurrency)
	if err != nil {
		return nil, err
	}
	// HTTP/2 (as FCM speaks it) over TLS or h2c; HTTP/1.1 to a plain
	// http:// emulator.
	h2 := o.H2C || o.Endpoint == "" || strings.HasPrefix(o.Endpoint, "https://")
	base := transport.NewConnPool(plain, max(o.Concurrency, 1), h2)
	budget := budgetTransport(base)
	projectID := o.ProjectID
	endpoint := strings.TrimRight(o.Endpoint, "/")
	var hc *http.Client
	// recorder makes the authenticated transport hand back the headers it
	// would send (transport.HeaderRecorder); nil: there is no
	// authentication.
	var recorder http.RoundTripper
	if o.Endpoint != "" {
		hc = &http.Client{Transport: budget}
	} else {
		endpoint = defaultFCMEndpoint
		if o.CredentialsFile == "" {
			return nil, errors.New("fcm: real FCM needs a service-account credentials file")
		}
		if projectID == "" {
			if projectID, err = projectFromCredentials(o.CredentialsFile); err != nil {
				return nil, err
			}
		}
		// NewTransport adds Google auth on top of our tuned, budgeted base;
		// a request the HTTP/2 client marks stops under the auth, so that
		// it sends the same headers with the same token.
		authed, err := htransport.NewTransport(ctx, transport.HeaderRecorder(budget),
			option.WithAuthCredentialsFile(option.ServiceAccount, o.CredentialsFile),
			option.WithScopes("https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform"),
		)
		if err != nil {
			return nil, fmt.Errorf("fcm: building authenticated transport: %w", err)
		}
		hc = &http.Client{Transport: authed}
		recorder = authed
	}
	if projectID == "" {
		return nil, errors.New("fcm: a project id is required")
	}
	if o.Client != ClientSDK {
		direct := newDirectClient(endpoint, projectID)
		direct.tr, err = transport.New(transport.Options{
			URL: direct.url, Header: direct.header, Auth: recorder, TLS: plain.TLSClientConfig,
			HTTP2: h2, H2C: o.H2C, NetHTTP: o.HTTP2 == HTTP2NetHTTP, Fallback: hc,
			Concurrency: o.Concurrency, Log: log,
		}, outcome)
		if err != nil {
			return nil, err
		}
		return &Client{direct: direct, transport: base, projectID: projectID}, nil
	}
	opts := []option.ClientOption{option.WithHTTPClient(hc)}
	if o.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(endpoint))
	}
	app, err := firebase.NewApp(ctx, &firebase.Config{ProjectID: projectID}, opts...)
	if err != nil {
		return nil, fmt.Errorf("fcm: creating firebase app: %w", err)
	}
	client, err := app.Messaging(ctx)
	if err != nil {
		return nil, fmt.Errorf("fcm: creating messaging client: %w", err)
	}
	return &Client{client: client, transport: base, projectID: projectID}, nil
}

func projectFromCredentials(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("fcm: reading credentials: %w", err)
	}
	var sa struct {
		ProjectID string `json:"project_id"`
	}
	if err := json.Unmarshal(raw, &sa); err != nil {
		return "", fmt.Errorf("fcm: parsing credentials %s: %w", path, err)
	}
	if sa.ProjectID == "" {
		return "", fmt.Errorf("fcm: %s has no project_id; set PUSHFAN_FCM_PROJECT_ID", path)
	}
	return sa.ProjectID, nil
}

// Prepare readies msg for sending to any number of tokens (fanout.Sender):
// the SDK's message is built once, and for the direct client the request
// body is encoded once with a place for the token.
func (c *Client) Prepare(msg *fanout.Message) (fanout.Prepared, error) {
	tmpl, err := sdkMessage(msg)
	if err != nil {
		return nil, err
	}
	if c.direct != nil {
		return c.direct.prepare(tmpl, msg.DryRun, msg.Tagged)
	}
	return &sdkPrepared{client: c.client, tmpl: tmpl, dryRun: msg.DryRun, tagged: msg.Tagged}, nil
}

// Close releases idle connections, and closes the HTTP/2 client's
// connections: it returns when their goroutines have ended.
func (c *Client) Close() {
	c.transport.CloseIdleConnections()
	if c.direct != nil {
		c.direct.tr.Close()
	}
}

// sdkMessage is the SDK's message for msg, without a token: its platform
// overrides (platform.go), then its delivery defaults where they set
// none.
func sdkMessage(m *fanout.Message) (messaging.Message, error) {
	t := messaging.Message{Data: m.Data}
	if m.Title != "" || m.Body != "" || m.Image != "" {
		t.Notification = &messaging.Notification{Title: m.Title, Body: m.Body, ImageURL: m.Image}
	}
	if err := setPlatform(&t, m.Platform); err != nil {
		return t, err
	}
	setDeliveryDefaults(&t, m.Delivery)
	return t, nil
}

// sdkPrepared sends through messaging.Client.Send.
type sdkPrepared struct {
	client *messaging.Client
	tmpl   messaging.Message // shared read-only; each send copies it and sets Token
	dryRun bool
	tagged bool // holds fanout.TagPlaceholder (in data, in the web link)
}

// SendTagged is Send with every fanout.TagPlaceholder replaced by tag, in
// copies of the data and the web push options (the SDK path encodes every
// message anyway).
func (p *sdkPrepared) SendTagged(ctx context.Context, token, tag string, b fanout.Budget) fanout.Outcome {
	if !p.tagged {
		return p.Send(ctx, token, b)
	}
	q := *p
	q.tmpl.Data = make(map[string]string, len(p.tmpl.Data))
	for k, v := range p.tmpl.Data {
		q.tmpl.Data[k] = strings.ReplaceAll(v, fanout.TagPlaceholder, tag)
	}
	if w := p.tmpl.Webpush; w != nil && w.FCMOptions != nil {
		wc, oc := *w, *w.FCMOptions
		oc.Link = strings.ReplaceAll(oc.Link, fanout.TagPlaceholder, tag)
		wc.FCMOptions = &oc
		q.tmpl.Webpush = &wc
	}
	return q.Send(ctx, token, b)
}

// Send makes one engine attempt, which may hide the SDK's own retries of
// 503s and network errors: the budget transport counts each request
// against b and stops the SDK when it is spent.
func (p *sdkPrepared) Send(ctx context.Context, token string, b fanout.Budget) fanout.Outcome {
	st := &attemptState{max: int32(b.Max)}
	st.used.Store(int32(b.Used))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	st.stop = cancel
	m := p.tmpl
	m.Token = token
	var name string
	var err error
	if p.dryRun {
		name, err = p.client.SendDryRun(withAttempts(ctx, st), &m)
	} else {
		name, err = p.client.Send(withAttempts(ctx, st), &m)
	}
	out := classify(ctx, err)
	out.Requests = int(st.used.Load()) - b.Used
	if out.Class == fanout.Success {
		out.MessageID = name // the SDK returns the response's "name"
	}
	return out
}
