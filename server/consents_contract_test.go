package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"pushfan/consent"
	"pushfan/model"
	"pushfan/server"
)

// fakeConsents answers as consent.Book would for one category kept in
// the table (advertising), one needing none (service): its refusals are
// the book's, so that the tests see what the API makes of them.
type fakeConsents struct {
	set []consent.Answer
	due []time.Time // the cutoffs asked
}

var consentTime = time.Date(2026, 12, 5, 9, 30, 0, 0, time.UTC)

func (f *fakeConsents) category(category string) error {
	switch category {
	case "advertising":
		return nil
	case "service":
		return &consent.FieldError{Field: "category", Code: "no_consent_table", Message: "category \"service\" needs no consent beyond push_enabled, so there is nothing to record here"}
	}
	return &consent.FieldError{Field: "category", Code: "unknown_category", Message: "not in categories"}
}

func (f *fakeConsents) Set(_ context.Context, userID uint64, category string, a consent.Answer) (model.Consent, error) {
	if err := f.category(category); err != nil {
		return model.Consent{}, err
	}
	if a.Night && !a.Granted {
		return model.Consent{}, &consent.FieldError{Field: "night", Code: "night_without_consent", Message: "night needs granted"}
	}
	if len([]rune(a.Source)) > consent.MaxSource {
		return model.Consent{}, &consent.FieldError{Field: "source", Code: "too_long", Message: "source is too long"}
	}
	f.set = append(f.set, a)
	c := model.Consent{UserID: userID, Category: category, Granted: a.Granted, Night: a.Night, Source: a.Source, Updated: consentTime, Changed: consentTime.Add(-time.Hour)}
	return c, nil
}

func (f *fakeConsents) Get(_ context.Context, userID uint64) ([]model.Consent, error) {
	return []model.Consent{
		{UserID: userID, Category: "advertising", Granted: true, Source: "signup", Updated: consentTime, Changed: consentTime},
		{UserID: userID, Category: "digest"},
	}, nil
}

func (f *fakeConsents) History(_ context.Context, _ uint64, category string, limit int) ([]consent.Record, error) {
	if err := f.category(category); err != nil {
		return nil, err
	}
	out := []consent.Record{
		{Granted: false, Source: "settings", Actor: "crm", RequestID: "r2", At: consentTime},
		{Granted: true, Night: true, Source: "signup", Actor: "ci", RequestID: "r1", At: consentTime.Add(-time.Hour)},
	}
	return out[:min(limit, len(out))], nil
}

func (f *fakeConsents) Due(_ context.Context, category string, cutoff time.Time, after string, limit int) (consent.DuePage, error) {
	if category != "" {
		if err := f.category(category); err != nil {
			return consent.DuePage{}, err
		}
	}
	if after != "" && after != "next-1" {
		return consent.DuePage{}, &consent.FieldError{Field: "after", Code: "invalid_cursor", Message: "not a cursor this API returned"}
	}
	f.due = append(f.due, cutoff)
	old := model.Consent{UserID: 3, Category: "advertising", Granted: true, Updated: cutoff.AddDate(0, -1, 0), Changed: cutoff.AddDate(0, -1, 0)}
	if after == "" && limit == 1 {
		return consent.DuePage{Consents: []model.Consent{old}, Next: "next-1"}, nil
	}
	return consent.DuePage{Consents: []model.Consent{old}}, nil
}

func consentServer(t *testing.T, f *fakeConsents) http.Handler {
	t.Helper()
	return contractServer(t, &fakeDomain{}, func(d *server.Domain) {
		d.Consents = f
		d.Categories = server.Categories{Default: "service", List: []model.Category{
			{Name: "advertising", Consent: model.ConsentTable, TitlePrefix: "(광고) ",
				Night: &model.NightRule{Window: model.QuietHours{Start: "21:00", End: "08:00"}, Consent: model.ConsentTable}},
			{Name: "service"},
		}}
	})
}

// A PUT answers the consent as stored, and passes the answer on with who
// recorded it: the token's name and the request's id.
func TestContractConsentPutAnswersTheConsent(t *testing.T) {
	t.Parallel()
	f := &fakeConsents{}
	h := consentServer(t, f)
	rec, out := call(t, h, http.MethodPut, "/push/users/42/consents/advertising", contractSender,
		`{"granted": true, "night": true, "source": "settings"}`, "X-Request-Id", "req-consent-1")
	if rec.Code != http.StatusOK {
		t.Fatalf("PUT: %d %v", rec.Code, out)
	}
	want := map[string]any{"user_id": 42.0, "category": "advertising", "granted": true, "night": true, "source": "settings",
		"updated_at": "2026-12-05T09:30:00Z", "changed_at": "2026-12-05T08:30:00Z"}
	if len(out) != len(want) {
		t.Fatalf("consent object %v; want %v", out, want)
	}
	for k, v := range want {
		if out[k] != v {
			t.Fatalf("consent object %v; want %v", out, want)
		}
	}
	if len(f.set) != 1 || f.set[0] != (consent.Answer{Granted: true, Night: true, Source: "settings", Actor: "ci", RequestID: "req-consent-1"}) {
		t.Fatalf("answers passed on: %+v", f.set)
	}
	// night is optional: false.
	rec, out = call(t, h, http.MethodPut, "/push/users/42/consents/advertising", contractSender, `{"granted": false}`)
	if rec.Code != http.StatusOK || out["granted"] != false || out["night"] != false || f.set[1].Night || f.set[1].RequestID == "" {
		t.Fatalf("PUT granted false: %d %v, passed %+v", rec.Code, out, f.set[1])
	}
}

// Every input the routes cannot take is a 400 naming the field, and no
// answer is recorded; a viewer may read but not record.
func TestContractConsentBadInputs(t *testing.T) {
	t.Parallel()
	f := &fakeConsents{}
	h := consentServer(t, f)
	const adv = "/push/users/42/consents/advertising"
	for _, c := range []struct {
		name, method, path, body string
		code, field              string
	}{
		{"id not a number", http.MethodPut, "/push/users/abc/consents/advertising", `{"granted": true}`, "invalid_id", "id"},
		{"id zero", http.MethodPut, "/push/users/0/consents/advertising", `{"granted": true}`, "invalid_id", "id"},
		{"id negative", http.MethodPut, "/push/users/-3/consents/advertising", `{"granted": true}`, "invalid_id", "id"},
		{"granted missing", http.MethodPut, adv, `{"night": false, "source": "x"}`, "missing_field", "granted"},
		{"granted null", http.MethodPut, adv, `{"granted": null}`, "missing_field", "granted"},
		{"granted a string", http.MethodPut, adv, `{"granted": "yes"}`, "invalid_type", "granted"},
		{"night a string", http.MethodPut, adv, `{"granted": true, "night": "yes"}`, "invalid_type", "night"},
		{"unknown field", http.MethodPut, adv, `{"granted": true, "colour": "red"}`, "unknown_field", "colour"},
		{"empty body", http.MethodPut, adv, ``, "empty_body", ""},
		{"trailing data", http.MethodPut, adv, `{"granted": true} {}`, "malformed_json", ""},
		{"unknown category", http.MethodPut, "/push/users/42/consents/nope", `{"granted": true}`, "unknown_category", "category"},
		{"category needing no consent", http.MethodPut, "/push/users/42/consents/service", `{"granted": true}`, "no_consent_table", "category"},
		{"night without granted", http.MethodPut, adv, `{"granted": false, "night": true}`, "night_without_consent", "night"},
		{"source too long", http.MethodPut, adv, `{"granted": true, "source": "` + strings.Repeat("s", consent.MaxSource+1) + `"}`, "too_long", "source"},
		{"get: id not a number", http.MethodGet, "/push/users/x1/consents", "", "invalid_id", "id"},
		{"history: id zero", http.MethodGet, "/push/users/0/consents/advertising/history", "", "invalid_id", "id"},
		{"history: limit zero", http.MethodGet, adv + "/history?limit=0", "", "invalid_value", "limit"},
		{"history: limit too big", http.MethodGet, adv + "/history?limit=501", "", "invalid_value", "limit"},
		{"history: limit not a number", http.MethodGet, adv + "/history?limit=ten", "", "invalid_value", "limit"},
		{"history: category needing no consent", http.MethodGet, "/push/users/42/consents/service/history", "", "no_consent_table", "category"},
		{"due: limit zero", http.MethodGet, "/push/consents/due?limit=0", "", "invalid_value", "limit"},
		{"due: limit too big", http.MethodGet, "/push/consents/due?limit=1001", "", "invalid_value", "limit"},
		{"due: unknown category", http.MethodGet, "/push/consents/due?category=nope", "", "unknown_category", "category"},
		{"due: bad after", http.MethodGet, "/push/consents/due?after=forged", "", "invalid_cursor", "after"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec, out := call(t, h, c.method, c.path, contractSender, c.body)
			wantError(t, rec, out, http.StatusBadRequest, c.code, c.field)
		})
	}
	if len(f.set) != 0 {
		t.Fatalf("recorded %+v; want nothing", f.set)
	}
	rec, out := call(t, h, http.MethodPut, adv, contractViewer, `{"granted": true}`)
	wantError(t, rec, out, http.StatusForbidden, "forbidden", "")
	rec, out = call(t, h, http.MethodGet, "/push/users/42/consents", contractViewer, "")
	if rec.Code != http.StatusOK || len(f.set) != 0 {
		t.Fatalf("viewer GET: %d %v", rec.Code, out)
	}
}

// GET /push/users/{id}/consents answers every table category, the ones
// never answered without times; the history answers its records.
func TestContractConsentReads(t *testing.T) {
	t.Parallel()
	h := consentServer(t, &fakeConsents{})
	rec, out := call(t, h, http.MethodGet, "/push/users/42/consents", contractViewer, "")
	cs, _ := out["consents"].([]any)
	if rec.Code != http.StatusOK || out["user_id"] != 42.0 || len(cs) != 2 {
		t.Fatalf("GET consents: %d %v", rec.Code, out)
	}
	answered, never := cs[0].(map[string]any), cs[1].(map[string]any)
	if answered["updated_at"] != "2026-12-05T09:30:00Z" || answered["granted"] != true || answered["source"] != "signup" {
		t.Fatalf("answered: %v", answered)
	}
	if _, ok := never["updated_at"]; ok || never["granted"] != false || never["night"] != false || never["category"] != "digest" {
		t.Fatalf("never answered: %v", never)
	}
	if _, ok := never["changed_at"]; ok {
		t.Fatalf("never answered has changed_at: %v", never)
	}

	rec, out = call(t, h, http.MethodGet, "/push/users/42/consents/advertising/history?limit=1", contractViewer, "")
	hist, _ := out["history"].([]any)
	if rec.Code != http.StatusOK || len(hist) != 1 {
		t.Fatalf("history: %d %v", rec.Code, out)
	}
	r := hist[0].(map[string]any)
	if r["granted"] != false || r["night"] != false || r["source"] != "settings" || r["actor"] != "crm" || r["request_id"] != "r2" || r["at"] != "2026-12-05T09:30:00Z" || len(r) != 6 {
		t.Fatalf("history record: %v", r)
	}
}

// The consents due are asked with the cutoff two years before now, and
// page with next until the last page, which has none.
func TestContractConsentDue(t *testing.T) {
	t.Parallel()
	f := &fakeConsents{}
	h := consentServer(t, f)
	rec, out := call(t, h, http.MethodGet, "/push/consents/due?limit=1", contractViewer, "")
	cs, _ := out["consents"].([]any)
	if rec.Code != http.StatusOK || len(cs) != 1 || out["next"] != "next-1" {
		t.Fatalf("first page: %d %v", rec.Code, out)
	}
	if len(f.due) != 1 {
		t.Fatalf("asked %d times", len(f.due))
	}
	if want := time.Now().AddDate(-consent.ReconfirmYears, 0, 0); f.due[0].Sub(want).Abs() > time.Minute {
		t.Fatalf("cutoff %v; want about %v", f.due[0], want)
	}
	if cutoff, _ := time.Parse(time.RFC3339Nano, out["cutoff"].(string)); !cutoff.Equal(f.due[0]) {
		t.Fatalf("answered cutoff %v; asked %v", out["cutoff"], f.due[0])
	}
	rec, out = call(t, h, http.MethodGet, "/push/consents/due?category=advertising&after=next-1", contractSender, "")
	if _, ok := out["next"]; rec.Code != http.StatusOK || ok || len(out["consents"].([]any)) != 1 {
		t.Fatalf("last page: %d %v", rec.Code, out)
	}
}

// GET /push/categories answers the categories as broadcasts run under
// them, and the default one only when there is one.
func TestContractCategories(t *testing.T) {
	t.Parallel()
	h := consentServer(t, &fakeConsents{})
	rec, out := call(t, h, http.MethodGet, "/push/categories", contractViewer, "")
	cats, _ := out["categories"].([]any)
	if rec.Code != http.StatusOK || out["default_category"] != "service" || len(cats) != 2 {
		t.Fatalf("categories: %d %v", rec.Code, out)
	}
	adv := cats[0].(map[string]any)
	night, _ := adv["night"].(map[string]any)
	if adv["name"] != "advertising" || adv["consent"] != "table" || adv["title_prefix"] != "(광고) " || night["consent"] != "table" {
		t.Fatalf("advertising: %v", adv)
	}
	if svc := cats[1].(map[string]any); len(svc) != 1 || svc["name"] != "service" {
		t.Fatalf("service: %v", svc)
	}
	h = contractServer(t, &fakeDomain{})
	rec, out = call(t, h, http.MethodGet, "/push/categories", contractViewer, "")
	if _, ok := out["default_category"]; rec.Code != http.StatusOK || ok || len(out["categories"].([]any)) != 0 {
		t.Fatalf("no categories: %d %v", rec.Code, out)
	}
}
