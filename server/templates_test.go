package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"pushfan/audit"
)

// template is a message template as the API answers it.
type template struct {
	Name  string            `json:"name"`
	Title string            `json:"title"`
	Body  string            `json:"body"`
	Data  map[string]string `json:"data"`
	Link  string            `json:"link"`
}

type apiErr struct {
	Error struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"error"`
}

// Message templates are saved, listed, replaced and deleted through the
// API (the contract client checks every exchange against the document),
// each bad write a 4xx naming its field, and each change writes exactly
// one audit entry in its transaction.
func TestTemplatesAreSavedListedAndAudited(t *testing.T) {
	t.Parallel()
	s := auditStack(t)
	var list struct {
		Templates []template `json:"templates"`
		PublicURL *string    `json:"public_url"`
	}
	if r := s.Do(http.MethodGet, "/push/templates", nil, &list); r.StatusCode != http.StatusOK || len(list.Templates) != 0 {
		t.Fatalf("empty list: %d %+v", r.StatusCode, list)
	}
	var saved template
	welcome := map[string]any{"name": "welcome", "title": "Hi {{.first_name}}", "body": "Your code is {{.code}}",
		"data": map[string]string{"screen": "home"}, "link": "https://shop.example.com/w"}
	if r := s.Do(http.MethodPost, "/push/templates", welcome, &saved); r.StatusCode != http.StatusCreated ||
		saved.Name != "welcome" || saved.Title != "Hi {{.first_name}}" || saved.Data["screen"] != "home" || saved.Link != "https://shop.example.com/w" {
		t.Fatalf("create: %d %+v", r.StatusCode, saved)
	}
	for _, c := range []struct {
		name         string
		method, path string
		body         map[string]any
		status       int
		code, field  string
	}{
		{"a taken name", http.MethodPost, "/push/templates", welcome, http.StatusConflict, "template_exists", "name"},
		{"no name", http.MethodPost, "/push/templates", map[string]any{"body": "b"}, http.StatusBadRequest, "required", "name"},
		{"no text", http.MethodPost, "/push/templates", map[string]any{"name": "empty"}, http.StatusBadRequest, "required", "body"},
		{"a broken variable", http.MethodPost, "/push/templates", map[string]any{"name": "bad", "body": "Hi {{.name"}, http.StatusBadRequest, "invalid_template", "body"},
		{"a bad link", http.MethodPost, "/push/templates", map[string]any{"name": "bad", "body": "b", "link": "shop"}, http.StatusBadRequest, "invalid_value", "link"},
		{"data over FCM's payload", http.MethodPost, "/push/templates", map[string]any{"name": "big", "body": "b", "data": map[string]string{"blob": strings.Repeat("x", 5000)}}, http.StatusBadRequest, "too_long", "data"},
		{"a slash in the name", http.MethodPost, "/push/templates", map[string]any{"name": "a/b", "body": "b"}, http.StatusBadRequest, "invalid_value", "name"},
		{"a name unlike the path's", http.MethodPut, "/push/templates/welcome", map[string]any{"name": "other", "body": "b"}, http.StatusBadRequest, "invalid_value", "name"},
		{"an unknown template", http.MethodPut, "/push/templates/nope", map[string]any{"body": "b"}, http.StatusNotFound, "template_not_found", ""},
		{"deleting an unknown one", http.MethodDelete, "/push/templates/nope", nil, http.StatusNotFound, "template_not_found", ""},
	} {
		var e apiErr
		var body any
		if c.body != nil {
			body = c.body
		}
		if r := s.Do(c.method, c.path, body, &e); r.StatusCode != c.status || e.Error.Code != c.code || e.Error.Field != c.field {
			t.Errorf("%s: %d %+v; want %d %s naming %q", c.name, r.StatusCode, e, c.status, c.code, c.field)
		}
	}
	var replaced template
	if r := s.Do(http.MethodPut, "/push/templates/welcome", map[string]any{"title": "Hello {{.first_name}}", "body": "Welcome"}, &replaced); r.StatusCode != http.StatusOK ||
		replaced.Title != "Hello {{.first_name}}" || len(replaced.Data) != 0 || replaced.Link != "" {
		t.Fatalf("replace: %d %+v", r.StatusCode, replaced)
	}
	list.Templates = nil
	if r := s.Do(http.MethodGet, "/push/templates", nil, &list); r.StatusCode != http.StatusOK || len(list.Templates) != 1 ||
		list.Templates[0].Title != "Hello {{.first_name}}" || list.Templates[0].Body != "Welcome" {
		t.Fatalf("list: %d %+v", r.StatusCode, list)
	}
	if r := s.Do(http.MethodDelete, "/push/templates/welcome", nil, nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", r.StatusCode)
	}
	list.Templates = nil
	if r := s.Do(http.MethodGet, "/push/templates", nil, &list); r.StatusCode != http.StatusOK || len(list.Templates) != 0 {
		t.Fatalf("list after the delete: %d %+v", r.StatusCode, list)
	}
	// Names the path escapes ("Q&A", the console's encodeURIComponent)
	// or holds as they are ("50%") are replaced and deleted by name.
	encodeURIComponent := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
	for _, name := range []string{"Q&A + more", "50% off"} {
		if r := s.Do(http.MethodPost, "/push/templates", map[string]any{"name": name, "body": "b"}, nil); r.StatusCode != http.StatusCreated {
			t.Fatalf("create %q: %d", name, r.StatusCode)
		}
		var put template
		if r := s.Do(http.MethodPut, "/push/templates/"+encodeURIComponent(name), map[string]any{"body": "b2"}, &put); r.StatusCode != http.StatusOK || put.Name != name || put.Body != "b2" {
			t.Fatalf("replace %q: %d %+v", name, r.StatusCode, put)
		}
		if r := s.Do(http.MethodDelete, "/push/templates/"+encodeURIComponent(name), nil, nil); r.StatusCode != http.StatusNoContent {
			t.Fatalf("delete %q: %d", name, r.StatusCode)
		}
	}
	got := auditEntries(t, s, "&target=template:welcome")
	want := []string{audit.TemplateDelete, audit.TemplateUpdate, audit.TemplateCreate} // newest first
	if len(got) != len(want) {
		t.Fatalf("%d audit entries, want %d: %+v", len(got), len(want), got)
	}
	for i, e := range got {
		if e.Action != want[i] || e.Target != "template:welcome" {
			t.Errorf("entry %d: %s %s, want %s template:welcome", i, e.Action, e.Target, want[i])
		}
	}
}
