package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"pushfan/model"
	"pushfan/segment"
	"pushfan/segment/filter"
	"pushfan/server"
)

// fakeSegments answers as segment.Catalog would, with its checks
// (segment.CheckWrite over a schema of four fields): the refusals the API
// renders are the catalog's own.
type fakeSegments struct {
	live     map[string]*model.Segment
	writes   []segment.Write
	previews []bool   // the exact asked
	values   []string // the fields whose values were asked
}

var segmentFields = filter.Fields{
	"platform":    {Name: "platform", Kind: filter.KindString, Expr: "t.platform"},
	"locale":      {Name: "locale", Kind: filter.KindString, Expr: "u.locale"},
	"app_version": {Name: "app_version", Kind: filter.KindVersion, Expr: "t.app_version"},
	"last_seen":   {Name: "last_seen", Kind: filter.KindTime, Expr: "t.updated_at"},
}

var segmentTime = time.Date(2026, 12, 5, 9, 30, 0, 0, time.UTC)

func (f *fakeSegments) Create(_ context.Context, w segment.Write) (model.Segment, error) {
	raw, err := segment.CheckWrite(w, segmentFields)
	if err != nil {
		return model.Segment{}, err
	}
	if f.live[w.Name] != nil {
		return model.Segment{}, fmt.Errorf("segment %q: %w", w.Name, segment.ErrExists)
	}
	f.writes = append(f.writes, w)
	s := &model.Segment{Name: w.Name, Version: 1, Description: *w.Description, Filter: raw, CreatedAt: segmentTime, UpdatedAt: segmentTime, CreatedBy: w.By,
		Versions: []model.SegmentVersion{{Version: 1, Description: *w.Description, Filter: raw, CreatedAt: segmentTime, CreatedBy: w.By}}}
	f.live[w.Name] = s
	return *s, nil
}

func (f *fakeSegments) Update(_ context.Context, w segment.Write) (model.Segment, error) {
	raw, err := segment.CheckWrite(w, segmentFields)
	if err != nil {
		return model.Segment{}, err
	}
	s := f.live[w.Name]
	if s == nil {
		return model.Segment{}, fmt.Errorf("segment %q: %w", w.Name, segment.ErrNotFound)
	}
	f.writes = append(f.writes, w)
	if w.Description != nil {
		s.Description = *w.Description
	}
	s.Version++
	s.Filter, s.UpdatedAt, s.CreatedBy = raw, segmentTime.Add(time.Hour), w.By
	s.Versions = append(s.Versions, model.SegmentVersion{Version: s.Version, Description: s.Description, Filter: raw, CreatedAt: s.UpdatedAt, CreatedBy: w.By})
	return *s, nil
}

func (f *fakeSegments) Get(_ context.Context, name string) (model.Segment, error) {
	if err := segment.CheckName(name); err != nil {
		return model.Segment{}, err
	}
	s := f.live[name]
	if s == nil {
		return model.Segment{}, segment.ErrNotFound
	}
	out := *s
	out.Versions = nil
	for _, v := range s.Versions {
		v.Filter = nil
		out.Versions = append(out.Versions, v)
	}
	return out, nil
}

func (f *fakeSegments) List(context.Context) ([]model.Segment, error) {
	var out []model.Segment
	for _, s := range f.live {
		out = append(out, model.Segment{Name: s.Name, Version: s.Version, Description: s.Description, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, CreatedBy: s.CreatedBy})
	}
	return out, nil
}

func (f *fakeSegments) Delete(_ context.Context, name string, _ time.Time) error {
	if err := segment.CheckName(name); err != nil {
		return err
	}
	if f.live[name] == nil {
		return segment.ErrNotFound
	}
	delete(f.live, name)
	return nil
}

func (f *fakeSegments) Version(_ context.Context, name string, version int) (model.SegmentVersion, error) {
	if err := segment.CheckName(name); err != nil {
		return model.SegmentVersion{}, err
	}
	s := f.live[name]
	if s == nil || version > len(s.Versions) {
		return model.SegmentVersion{}, segment.ErrNotFound
	}
	return s.Versions[version-1], nil
}

func (f *fakeSegments) Fields() filter.Fields { return segmentFields }

// Values answers the catalog's refusals (segment.CheckValuesField) and,
// for a field it takes, two values of it, the second "sampled".
func (f *fakeSegments) Values(_ context.Context, field string) (segment.Values, error) {
	if err := segment.CheckValuesField(field, segmentFields); err != nil {
		return segment.Values{}, err
	}
	f.values = append(f.values, field)
	if field == "app_version" {
		return segment.Values{Field: field}, nil // none: an empty list, not null
	}
	return segment.Values{Field: field, Values: []segment.Value{{Value: "pt-BR", Tokens: 1204}, {Value: "en", Tokens: 7}}, Sampled: true}, nil
}

func (f *fakeSegments) Preview(_ context.Context, raw json.RawMessage, exact bool) (segment.Preview, error) {
	if _, err := segment.CheckFilter(raw, segmentFields); err != nil {
		return segment.Preview{}, err
	}
	f.previews = append(f.previews, exact)
	if exact {
		return segment.Preview{Tokens: 1204, Users: 1000, Sample: []uint64{3, 7}, Exact: true}, nil
	}
	return segment.Preview{Tokens: 1200, Users: 1010, Sample: []uint64{3}}, nil
}

func segmentServer(t *testing.T, f *fakeSegments) http.Handler {
	t.Helper()
	if f.live == nil {
		f.live = map[string]*model.Segment{}
	}
	return contractServer(t, &fakeDomain{}, func(d *server.Domain) { d.Segments = f })
}

const iosFilter = `{"and":[{"field":"platform","op":"eq","value":"ios"},{"field":"app_version","op":"gte","value":"5.10.0"}]}`

// A segment is created (201), updated to version 2 keeping its
// description, read with its versions, listed, read at a version, and
// deleted (204); the writes carry the token's name.
func TestContractSegmentLifecycle(t *testing.T) {
	t.Parallel()
	f := &fakeSegments{}
	h := segmentServer(t, f)
	rec, out := call(t, h, http.MethodPost, "/push/segments", contractSender,
		`{"name": "ios-new", "description": "iOS on 5.10+", "filter": `+iosFilter+`}`)
	if rec.Code != http.StatusCreated || out["name"] != "ios-new" || out["version"] != 1.0 || out["description"] != "iOS on 5.10+" ||
		out["created_at"] != "2026-12-05T09:30:00Z" || out["created_by"] != "ci" || out["filter"] == nil {
		t.Fatalf("create: %d %v", rec.Code, out)
	}
	if b, _ := json.Marshal(out["filter"]); string(b) != iosFilter {
		t.Fatalf("filter %s; want %s", b, iosFilter)
	}
	rec, out = call(t, h, http.MethodPut, "/push/segments/ios-new", contractSender, `{"filter": {"field":"platform","op":"eq","value":"ios"}}`)
	if rec.Code != http.StatusOK || out["version"] != 2.0 || out["description"] != "iOS on 5.10+" {
		t.Fatalf("update: %d %v", rec.Code, out)
	}
	if len(f.writes) != 2 || f.writes[1].Description != nil || f.writes[1].By != "ci" || f.writes[1].At.IsZero() {
		t.Fatalf("writes %+v", f.writes)
	}
	rec, out = call(t, h, http.MethodGet, "/push/segments/ios-new", contractViewer, "")
	vs, _ := out["versions"].([]any)
	if rec.Code != http.StatusOK || out["version"] != 2.0 || len(vs) != 2 {
		t.Fatalf("get: %d %v", rec.Code, out)
	}
	if v := vs[0].(map[string]any); v["version"] != 1.0 || v["created_by"] != "ci" || v["filter"] != nil || v["created_at"] != "2026-12-05T09:30:00Z" {
		t.Fatalf("version 1 in the list: %v", v)
	}
	rec, out = call(t, h, http.MethodGet, "/push/segments", contractViewer, "")
	list, _ := out["segments"].([]any)
	if rec.Code != http.StatusOK || len(list) != 1 {
		t.Fatalf("list: %d %v", rec.Code, out)
	}
	if s := list[0].(map[string]any); s["name"] != "ios-new" || s["version"] != 2.0 || s["filter"] != nil || s["versions"] != nil || s["updated_at"] != "2026-12-05T10:30:00Z" {
		t.Fatalf("listed: %v", s)
	}
	rec, out = call(t, h, http.MethodGet, "/push/segments/ios-new/versions/1", contractViewer, "")
	if b, _ := json.Marshal(out["filter"]); rec.Code != http.StatusOK || out["version"] != 1.0 || string(b) != iosFilter {
		t.Fatalf("version 1: %d %v", rec.Code, out)
	}
	if code := callNoContent(t, h, http.MethodDelete, "/push/segments/ios-new", contractSender); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	rec, out = call(t, h, http.MethodGet, "/push/segments", contractViewer, "")
	if list, _ := out["segments"].([]any); rec.Code != http.StatusOK || list == nil || len(list) != 0 {
		t.Fatalf("list after delete: %d %v; want an empty array", rec.Code, out)
	}
}

// callNoContent serves one request whose answer has no body.
func callNoContent(t *testing.T, h http.Handler, method, path, token string) int {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code == http.StatusNoContent && rec.Body.Len() != 0 {
		t.Fatalf("%s %s: 204 with a body %q", method, path, rec.Body.String())
	}
	return rec.Code
}

// The preview answers the counts with exact as the domain says, asking
// for the exact count only when the request does.
func TestContractSegmentPreview(t *testing.T) {
	t.Parallel()
	f := &fakeSegments{}
	h := segmentServer(t, f)
	rec, out := call(t, h, http.MethodPost, "/push/segments/preview", contractSender, `{"filter": `+iosFilter+`}`)
	if rec.Code != http.StatusOK || out["tokens"] != 1200.0 || out["users"] != 1010.0 || out["exact"] != false || len(out["sample"].([]any)) != 1 || len(out) != 4 {
		t.Fatalf("preview: %d %v", rec.Code, out)
	}
	rec, out = call(t, h, http.MethodPost, "/push/segments/preview", contractSender, `{"filter": `+iosFilter+`, "exact": true}`)
	if rec.Code != http.StatusOK || out["tokens"] != 1204.0 || out["exact"] != true {
		t.Fatalf("preview exact: %d %v", rec.Code, out)
	}
	if len(f.previews) != 2 || f.previews[0] || !f.previews[1] {
		t.Fatalf("asked %v", f.previews)
	}
}

// Every input the routes cannot take is a 400 naming the field (in a
// filter, its path), an unknown name a 404, a live name taken a 409; a
// viewer reads and previews (counting is reading) but does not write.
func TestContractSegmentBadInputs(t *testing.T) {
	t.Parallel()
	f := &fakeSegments{}
	h := segmentServer(t, f)
	if rec, out := call(t, h, http.MethodPost, "/push/segments", contractSender, `{"name": "ios", "filter": `+iosFilter+`}`); rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %v", rec.Code, out)
	}
	ok := `"filter": ` + iosFilter
	for _, c := range []struct {
		name, method, path, body string
		code, field              string
	}{
		{"no name", http.MethodPost, "/push/segments", `{` + ok + `}`, "missing_field", "name"},
		{"upper-case name", http.MethodPost, "/push/segments", `{"name": "iOS", ` + ok + `}`, "invalid_name", "name"},
		{"name too long", http.MethodPost, "/push/segments", `{"name": "` + strings.Repeat("a", 65) + `", ` + ok + `}`, "invalid_name", "name"},
		{"name preview", http.MethodPost, "/push/segments", `{"name": "preview", ` + ok + `}`, "invalid_name", "name"},
		{"name fields", http.MethodPost, "/push/segments", `{"name": "fields", ` + ok + `}`, "invalid_name", "name"},
		{"name values", http.MethodPost, "/push/segments", `{"name": "values", ` + ok + `}`, "invalid_name", "name"},
		{"name a number", http.MethodPost, "/push/segments", `{"name": 7, ` + ok + `}`, "invalid_type", "name"},
		{"description too long", http.MethodPost, "/push/segments", `{"name": "b", "description": "` + strings.Repeat("d", 513) + `", ` + ok + `}`, "invalid_description", "description"},
		{"no filter", http.MethodPost, "/push/segments", `{"name": "b"}`, "invalid_filter", "filter"},
		{"filter null", http.MethodPost, "/push/segments", `{"name": "b", "filter": null}`, "invalid_filter", "filter"},
		{"filter a list", http.MethodPost, "/push/segments", `{"name": "b", "filter": []}`, "invalid_filter", "filter"},
		{"bad op at and[2]", http.MethodPost, "/push/segments", `{"name": "b", "filter": {"and": [{"field":"platform","op":"eq","value":"ios"},{"field":"locale","op":"eq","value":"de"},{"field":"platform","op":"within","value":"3d"}]}}`, "invalid_filter", "filter.and[2].op"},
		{"unknown field", http.MethodPost, "/push/segments", `{"name": "b", "filter": {"not": {"field":"attributes.plan","op":"eq","value":"pro"}}}`, "invalid_filter", "filter.not.field"},
		{"bad version value", http.MethodPost, "/push/segments", `{"name": "b", "filter": {"or": [{"field":"platform","op":"eq","value":"ios"},{"field":"app_version","op":"in","value":["5.1","x"]}]}}`, "invalid_filter", "filter.or[1].value[1]"},
		{"bad duration", http.MethodPost, "/push/segments", `{"name": "b", "filter": {"field":"last_seen","op":"within","value":"soon"}}`, "invalid_filter", "filter.value"},
		{"too deep", http.MethodPost, "/push/segments", `{"name": "b", "filter": {"not":{"not":{"not":{"not":{"not":{"field":"platform","op":"eq","value":"ios"}}}}}}}`, "invalid_filter", "filter.not.not.not.not.not"},
		{"unknown body field", http.MethodPost, "/push/segments", `{"name": "b", ` + ok + `, "colour": "red"}`, "unknown_field", "colour"},
		{"empty body", http.MethodPost, "/push/segments", ``, "empty_body", ""},
		{"update: bad filter", http.MethodPut, "/push/segments/ios", `{"filter": {"field":"platform","op":"eq"}}`, "invalid_filter", "filter.value"},
		{"update: name in body", http.MethodPut, "/push/segments/ios", `{"name": "x", ` + ok + `}`, "unknown_field", "name"},
		{"update: description a number", http.MethodPut, "/push/segments/ios", `{"description": 3, ` + ok + `}`, "invalid_type", "description"},
		{"update: bad name", http.MethodPut, "/push/segments/Bad", `{` + ok + `}`, "invalid_name", "name"},
		{"get: bad name", http.MethodGet, "/push/segments/Bad", ``, "invalid_name", "name"},
		{"version not a number", http.MethodGet, "/push/segments/ios/versions/one", ``, "invalid_version", "version"},
		{"version zero", http.MethodGet, "/push/segments/ios/versions/0", ``, "invalid_version", "version"},
		{"preview: no filter", http.MethodPost, "/push/segments/preview", `{"exact": true}`, "invalid_filter", "filter"},
		{"preview: bad path", http.MethodPost, "/push/segments/preview", `{"filter": {"and": [{"field":"platform","op":"eq","value":1}]}}`, "invalid_filter", "filter.and[0].value"},
		{"preview: exact a string", http.MethodPost, "/push/segments/preview", `{"filter": ` + iosFilter + `, "exact": "yes"}`, "invalid_type", "exact"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec, out := call(t, h, c.method, c.path, contractSender, c.body)
			wantError(t, rec, out, http.StatusBadRequest, c.code, c.field)
		})
	}
	if len(f.writes) != 1 || len(f.previews) != 0 {
		t.Fatalf("writes %+v, previews %v; want only the first create", f.writes, f.previews)
	}
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/push/segments/nobody", ""},
		{http.MethodPut, "/push/segments/nobody", `{` + ok + `}`},
		{http.MethodGet, "/push/segments/nobody/versions/1", ""},
		{http.MethodGet, "/push/segments/ios/versions/2", ""},
		// The preview's path is no segment's: the other methods reach
		// the segment routes, and find none.
		{http.MethodGet, "/push/segments/preview", ""},
		{http.MethodPut, "/push/segments/preview", `{` + ok + `}`},
	} {
		rec, out := call(t, h, c.method, c.path, contractSender, c.body)
		wantError(t, rec, out, http.StatusNotFound, "segment_not_found", "")
	}
	rec, out := call(t, h, http.MethodDelete, "/push/segments/nobody", contractSender, "")
	wantError(t, rec, out, http.StatusNotFound, "segment_not_found", "")
	rec, out = call(t, h, http.MethodPost, "/push/segments", contractSender, `{"name": "ios", `+ok+`}`)
	wantError(t, rec, out, http.StatusConflict, "segment_exists", "name")

	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/push/segments", `{"name": "v", ` + ok + `}`},
		{http.MethodPut, "/push/segments/ios", `{` + ok + `}`},
		{http.MethodDelete, "/push/segments/ios", ""},
	} {
		rec, out := call(t, h, c.method, c.path, contractViewer, c.body)
		wantError(t, rec, out, http.StatusForbidden, "forbidden", "")
	}
	// Counting is reading: a viewer may preview.
	if rec, out := call(t, h, http.MethodPost, "/push/segments/preview", contractViewer, `{`+ok+`}`); rec.Code != http.StatusOK {
		t.Errorf("a viewer's preview: %d %v; want 200", rec.Code, out)
	}
	for _, p := range []string{"/push/segments", "/push/segments/ios", "/push/segments/ios/versions/1"} {
		if rec, out := call(t, h, http.MethodGet, p, contractViewer, ""); rec.Code != http.StatusOK {
			t.Fatalf("viewer GET %s: %d %v", p, rec.Code, out)
		}
	}
}

// The values of a field: 200 with the field, its values and their
// tokens, and sampled, for a viewer too (a GET); an empty list is [];
// no field, an unknown one, or one of a kind with no values (a time) is a
// 400 naming field, and the domain is not asked.
func TestContractSegmentValues(t *testing.T) {
	t.Parallel()
	f := &fakeSegments{}
	h := segmentServer(t, f)
	for _, token := range []string{contractViewer, contractSender} {
		rec, out := call(t, h, http.MethodGet, "/push/segments/values?field=locale", token, "")
		if b, _ := json.Marshal(out); rec.Code != http.StatusOK ||
			string(b) != `{"field":"locale","sampled":true,"values":[{"tokens":1204,"value":"pt-BR"},{"tokens":7,"value":"en"}]}` {
			t.Fatalf("values of locale: %d %s", rec.Code, b)
		}
	}
	rec, out := call(t, h, http.MethodGet, "/push/segments/values?field=app_version", contractViewer, "")
	if b, _ := json.Marshal(out); rec.Code != http.StatusOK || string(b) != `{"field":"app_version","sampled":false,"values":[]}` {
		t.Fatalf("values of app_version: %d %s", rec.Code, b)
	}
	for _, c := range []struct{ query, code string }{
		{"", "missing_field"},
		{"?field=", "missing_field"},
		{"?name=locale", "missing_field"},
		{"?field=plan", "invalid_field"},
		{"?field=attributes.plan", "invalid_field"},
		{"?field=last_seen", "invalid_field"},
		{"?field=u.locale%27%20OR%201", "invalid_field"},
	} {
		t.Run(c.query, func(t *testing.T) {
			rec, out := call(t, h, http.MethodGet, "/push/segments/values"+c.query, contractViewer, "")
			wantError(t, rec, out, http.StatusBadRequest, c.code, "field")
		})
	}
	if len(f.values) != 3 || f.values[0] != "locale" || f.values[2] != "app_version" {
		t.Fatalf("the domain was asked for %v; want locale twice and app_version", f.values)
	}
	// A segment cannot be called values: the path is the route's.
	rec, out = call(t, h, http.MethodGet, "/push/segments/values/versions/1", contractViewer, "")
	wantError(t, rec, out, http.StatusNotFound, "segment_not_found", "")
}
