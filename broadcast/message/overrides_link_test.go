package message

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"pushfan/audience"
	"pushfan/model"
)

// A templated URL keeps the scheme and host its static prefix fixes: a
// value that moves it elsewhere fails that target's render, naming the
// field, and the others render as written.
func TestTemplatedLinksKeepTheirHost(t *testing.T) {
	m := model.Message{
		Android: json.RawMessage(`{"notification":{"image":"https://img.example.com{{.p}}"}}`),
		Webpush: json.RawMessage(`{"fcm_options":{"link":"https://example.com{{.p}}"}}`),
	}
	plat, err := newPlatformTemplate(m)
	if err != nil || plat == nil {
		t.Fatalf("newPlatformTemplate: %v %v", plat, err)
	}
	for _, c := range []struct {
		p     string
		field string // "" when the value keeps the host
	}{
		{"/sale?u=1", ""},
		{"", ""},
		{"#top", ""},
		{"@evil.com/x", "android.notification.image"},
		{".evil.com/x", "android.notification.image"},
		{":8443/x", "android.notification.image"},
		{"\\@evil.com", "android.notification.image"},
	} {
		out, err := plat.render(map[string]string{"p": c.p}, messagePlatform(m))
		if c.field == "" {
			if err != nil {
				t.Errorf("p=%q: %v", c.p, err)
				continue
			}
			var w struct {
				FCMOptions struct{ Link string } `json:"fcm_options"`
			}
			if json.Unmarshal(out.Webpush, &w) != nil || w.FCMOptions.Link != "https://example.com"+c.p {
				t.Errorf("p=%q: webpush %s", c.p, out.Webpush)
			}
			continue
		}
		var te *audience.TemplateError
		if !errors.As(err, &te) || te.Field != c.field || !strings.Contains(err.Error(), "example.com") {
			t.Errorf("p=%q: %v, want a template error naming %s", c.p, err, c.field)
		}
	}
	// The webpush link alone: its own field is named.
	m.Android = nil
	plat, err = newPlatformTemplate(m)
	if err != nil {
		t.Fatal(err)
	}
	_, err = plat.render(map[string]string{"p": "@evil.com/x"}, messagePlatform(m))
	var te *audience.TemplateError
	if !errors.As(err, &te) || te.Field != "webpush.fcm_options.link" {
		t.Fatalf("webpush link to evil.com: %v", err)
	}
}

// A templated URL whose first action is inside its host is refused when
// the request is checked: no rendered value could keep the host.
func TestTemplatedLinkWithTheActionInItsHost(t *testing.T) {
	for src, inHost := range map[string]bool{
		"https://example.com/{{.p}}":         false,
		"https://example.com?u={{.p}}":       false,
		"https://example.com#{{.p}}":         false,
		"https://example.com{{.p}}":          false, // pinned as written, checked per target
		"https://example.com{{.p}}/x":        false,
		"https://example.com{{.p}}{{.q}}":    false,
		"https://example.com{{- .p -}} /x":   false,
		"https://example.com:{{.port}}/x":    true,
		"https://api.{{.p}}/x":               true,
		"https://user@{{.p}}":                true,
		"https://api-{{.n}}.example.com/":    true,
		"https://api{{.n}}.example.com/":     true,
		"https://example.com{{.p}}evil.com/": true,
	} {
		static, _, _ := strings.Cut(src, "{{")
		if got := actionInHost(src, static); got != inHost {
			t.Errorf("%s: action in host %v, want %v", src, got, inHost)
		}
	}
	raw := json.RawMessage(`{"fcm_options":{"link":"https://api{{.n}}.example.com/x"}}`)
	p, err := parsePlatform([4]json.RawMessage{nil, nil, raw, nil})
	if err != nil {
		t.Fatalf("parsing (a stored message must still parse): %v", err)
	}
	var fe *FieldError
	if err := checkPlatformTemplates(p, []string{"n"}); !errors.As(err, &fe) || fe.Field != "webpush.fcm_options.link" || fe.Code != "invalid_value" {
		t.Fatalf("check: %v, want invalid_value naming webpush.fcm_options.link", err)
	}
}
