package server_test

import (
	"net/http"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

const (
	consentCRMToken    = "consent-crm-token-0123456789"
	consentViewerToken = "consent-viewer-token-0123456789"
)

// consentStack is a stack with two categories, advertising kept in the
// bundled consent table (night consent too) and service needing none,
// and a named sender (crm) and viewer (dash) beside the admin token.
func consentStack(t *testing.T) *teststack.Stack {
	t.Helper()
	return teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Categories = []config.Category{
			{Name: "advertising", Consent: "table", Night: &config.CategoryNight{Window: "21:00-08:00", Consent: "table"},
				TitlePrefix: "(광고) ", BodySuffix: "\n수신거부: 앱 설정 > 알림"},
			{Name: "service"},
		}
		c.DefaultCategory = "service"
		c.AdminTokens = append(c.AdminTokens, "crm:sender:"+consentCRMToken, "dash:viewer:"+consentViewerToken)
	}})
}

type consentObject struct {
	UserID    uint64     `json:"user_id"`
	Category  string     `json:"category"`
	Granted   bool       `json:"granted"`
	Night     bool       `json:"night"`
	Source    string     `json:"source"`
	UpdatedAt *time.Time `json:"updated_at"`
	ChangedAt *time.Time `json:"changed_at"`
}

// Through HTTP, the real stack and its database (every exchange checked
// against the OpenAPI document): an answer recorded by a named token is
// read back with its proof, a viewer is refused a change, and a consent
// older than two years is listed as due while a fresh one is not.
func TestConsentsEndToEnd(t *testing.T) {
	coveredBy(t, "package consent and the contract tests (consents_contract_test.go)")
	t.Parallel()
	s := consentStack(t)

	var cats struct {
		Categories []struct {
			Name    string `json:"name"`
			Consent string `json:"consent"`
		} `json:"categories"`
		DefaultCategory string `json:"default_category"`
	}
	if r := s.DoAuth(http.MethodGet, "/push/categories", consentViewerToken, nil, &cats); r.StatusCode != http.StatusOK ||
		len(cats.Categories) != 2 || cats.Categories[0].Consent != "table" || cats.DefaultCategory != "service" {
		t.Fatalf("GET /push/categories: %d %+v", r.StatusCode, cats)
	}

	var put consentObject
	r := s.DoAuth(http.MethodPut, "/push/users/42/consents/advertising", consentCRMToken, map[string]any{"granted": true, "night": true, "source": "signup"}, &put)
	if r.StatusCode != http.StatusOK || put.UserID != 42 || !put.Granted || !put.Night || put.Source != "signup" || put.UpdatedAt == nil || put.ChangedAt == nil || !put.UpdatedAt.Equal(*put.ChangedAt) {
		t.Fatalf("PUT: %d %+v", r.StatusCode, put)
	}
	reqID := r.Header.Get("X-Request-Id")
	var again consentObject
	if r := s.DoAuth(http.MethodPut, "/push/users/42/consents/advertising", consentCRMToken, map[string]any{"granted": true, "night": true, "source": "reconfirm"}, &again); r.StatusCode != http.StatusOK ||
		!again.ChangedAt.Equal(*put.ChangedAt) || !again.UpdatedAt.After(*put.UpdatedAt) {
		t.Fatalf("the same answer again: %d %+v; want changed_at %v kept, updated_at later", r.StatusCode, again, put.ChangedAt)
	}
	var refused teststack.ErrorBody
	if r := s.DoAuth(http.MethodPut, "/push/users/42/consents/advertising", consentViewerToken, map[string]any{"granted": false}, &refused); r.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer PUT: %d %+v", r.StatusCode, refused)
	}
	if r := s.Do(http.MethodPut, "/push/users/42/consents/service", map[string]any{"granted": true}, &refused); r.StatusCode != http.StatusBadRequest ||
		refused.Error.Field != "category" || refused.Error.Code != "no_consent_table" {
		t.Fatalf("PUT service: %d %+v", r.StatusCode, refused)
	}
	if r := s.Do(http.MethodPut, "/push/users/42/consents/advertising", map[string]any{"granted": false, "night": true}, &refused); r.StatusCode != http.StatusBadRequest ||
		refused.Error.Field != "night" {
		t.Fatalf("PUT night without granted: %d %+v", r.StatusCode, refused)
	}

	var got struct {
		UserID   uint64          `json:"user_id"`
		Consents []consentObject `json:"consents"`
	}
	if r := s.DoAuth(http.MethodGet, "/push/users/42/consents", consentViewerToken, nil, &got); r.StatusCode != http.StatusOK ||
		got.UserID != 42 || len(got.Consents) != 1 || got.Consents[0].Source != "reconfirm" || !got.Consents[0].UpdatedAt.Equal(*again.UpdatedAt) {
		t.Fatalf("GET consents: %d %+v", r.StatusCode, got)
	}
	var never struct {
		Consents []consentObject `json:"consents"`
	}
	if r := s.Do(http.MethodGet, "/push/users/43/consents", nil, &never); r.StatusCode != http.StatusOK ||
		len(never.Consents) != 1 || never.Consents[0].Granted || never.Consents[0].UpdatedAt != nil {
		t.Fatalf("GET consents of a user who never answered: %d %+v", r.StatusCode, never)
	}

	var hist struct {
		History []struct {
			Source    string    `json:"source"`
			Actor     string    `json:"actor"`
			RequestID string    `json:"request_id"`
			At        time.Time `json:"at"`
		} `json:"history"`
	}
	if r := s.DoAuth(http.MethodGet, "/push/users/42/consents/advertising/history?limit=10", consentViewerToken, nil, &hist); r.StatusCode != http.StatusOK ||
		len(hist.History) != 2 || hist.History[0].Source != "reconfirm" || hist.History[1].Source != "signup" ||
		hist.History[1].Actor != "crm" || hist.History[1].RequestID != reqID || reqID == "" || !hist.History[1].At.Equal(*put.UpdatedAt) {
		t.Fatalf("history: %d %+v (first PUT's request id %q)", r.StatusCode, hist, reqID)
	}

	// User 7 consented three years ago and never since; user 8 a year ago.
	s.MustExec(`INSERT INTO user_consents (user_id, category, granted, night, updated_at, changed_at, source) VALUES
		(7, 'advertising', 1, 0, UTC_TIMESTAMP(6) - INTERVAL 3 YEAR, UTC_TIMESTAMP(6) - INTERVAL 3 YEAR, 'signup'),
		(8, 'advertising', 1, 0, UTC_TIMESTAMP(6) - INTERVAL 1 YEAR, UTC_TIMESTAMP(6) - INTERVAL 1 YEAR, 'signup'),
		(9, 'advertising', 0, 0, UTC_TIMESTAMP(6) - INTERVAL 3 YEAR, UTC_TIMESTAMP(6) - INTERVAL 3 YEAR, 'signup')`)
	var due struct {
		Consents []consentObject `json:"consents"`
		Next     *string         `json:"next"`
		Cutoff   time.Time       `json:"cutoff"`
	}
	if r := s.DoAuth(http.MethodGet, "/push/consents/due?category=advertising&limit=10", consentViewerToken, nil, &due); r.StatusCode != http.StatusOK ||
		len(due.Consents) != 1 || due.Consents[0].UserID != 7 || due.Next != nil ||
		due.Cutoff.Sub(time.Now().AddDate(-2, 0, 0)).Abs() > time.Minute {
		t.Fatalf("due: %d %+v", r.StatusCode, due)
	}
}
