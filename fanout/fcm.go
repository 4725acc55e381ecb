package fanout

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/messaging"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"
)

// FCMOptions says where and how to reach FCM.
type FCMOptions struct {
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
}

// defaultFCMEndpoint is Google's FCM HTTP v1 base URL (the SDK's default).
const defaultFCMEndpoint = "https://fcm.googleapis.com/v1"

// The two ways FCMSender can send.
const (
	// ClientDirect posts a body encoded once per message (fcmdirect.go).
	ClientDirect = "direct"
	// ClientSDK calls messaging.Client.Send for every token.
	ClientSDK = "sdk"
)

// FCMSender sends one HTTP v1 request per token, through the firebase
// Admin SDK's messaging.Client.Send or the direct client (fcmdirect.go).
type FCMSender struct {
	client    *messaging.Client
	direct    *directClient // nil: use client
	transport *http.Transport
}

// NewFCMSender builds the messaging client on a transport sized for
// o.Concurrency, wrapped by the attempt-budget transport (see attempts.go).
func NewFCMSender(ctx context.Context, o FCMOptions) (*FCMSender, error) {
	switch o.Client {
	case "", ClientDirect, ClientSDK:
	default:
		return nil, fmt.Errorf("fcm: client must be %q or %q, got %q", ClientDirect, ClientSDK, o.Client)
	}
	base, err := baseTransport(o)
	if err != nil {
		return nil, err
	}
	budget := WrapTransport(base)
	projectID := o.ProjectID
	endpoint := strings.TrimRight(o.Endpoint, "/")
	var hc *http.Client
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
		// NewTransport adds Google auth on top of our tuned, budgeted base.
		authed, err := htransport.NewTransport(ctx, budget,
			option.WithAuthCredentialsFile(option.ServiceAccount, o.CredentialsFile),
			option.WithScopes("https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform"),
		)
		if err != nil {
			return nil, fmt.Errorf("fcm: building authenticated transport: %w", err)
		}
		hc = &http.Client{Transport: authed}
	}
	if projectID == "" {
		return nil, errors.New("fcm: a project id is required")
	}
	if o.Client != ClientSDK {
		return &FCMSender{direct: newDirectClient(hc, endpoint, projectID), transport: base}, nil
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
	return &FCMSender{client: client, transport: base}, nil
}

func baseTransport(o FCMOptions) (*http.Transport, error) {
	conc := o.Concurrency
	if conc < 1 {
		conc = 1
	}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          conc + 16,
		MaxIdleConnsPerHost:   conc + 16, // every worker keeps its connection between sends
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("fcm: reading CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fcm: %s holds no PEM certificate", o.CAFile)
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if o.H2C {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		t.Protocols = &p
	}
	return t, nil
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

// Send sends msg to one token.
func (s *FCMSender) Send(ctx context.Context, msg *Message, token string) error {
	if s.direct != nil {
		return s.direct.send(ctx, msg, token)
	}
	m := msg.fcmTemplate() // a copy: shares the read-only parts, owns Token
	m.Token = token
	var err error
	if msg.DryRun {
		_, err = s.client.SendDryRun(ctx, &m)
	} else {
		_, err = s.client.Send(ctx, &m)
	}
	return err
}

// Close releases idle connections.
func (s *FCMSender) Close() { s.transport.CloseIdleConnections() }

// fcmTemplate builds the SDK message once per broadcast; each send copies
// the struct and sets Token, so the notification, data and platform configs
// are shared rather than rebuilt per token.
func (m *Message) fcmTemplate() messaging.Message {
	m.once.Do(func() {
		t := messaging.Message{Data: m.Data}
		if m.Title != "" || m.Body != "" || m.Image != "" {
			t.Notification = &messaging.Notification{Title: m.Title, Body: m.Body, ImageURL: m.Image}
		}
		if m.CollapseKey != "" {
			t.Android = &messaging.AndroidConfig{CollapseKey: m.CollapseKey}
			t.APNS = &messaging.APNSConfig{Headers: map[string]string{"apns-collapse-id": m.CollapseKey}}
		}
		m.tmpl = t
	})
	return m.tmpl
}
