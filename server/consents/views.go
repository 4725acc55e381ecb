package consents

import (
	"time"

	"pushfan/consent"
	"pushfan/model"
)

// request is the body of PUT /push/users/{id}/consents/{category}.
type request struct {
	Granted *bool  `json:"granted"` // required: an answer is never assumed
	Night   bool   `json:"night"`
	Source  string `json:"source"`
}

// Consent is one user's consent to one category; one never answered has
// no times.
type Consent struct {
	UserID   uint64     `json:"user_id"`
	Category string     `json:"category"`
	Granted  bool       `json:"granted"`
	Night    bool       `json:"night"`
	Source   string     `json:"source"`
	Updated  *time.Time `json:"updated_at,omitempty"`
	Changed  *time.Time `json:"changed_at,omitempty"`
}

// CategoryList is GET /push/categories's answer.
type CategoryList struct {
	Categories      []model.Category `json:"categories"`
	DefaultCategory string           `json:"default_category,omitempty"`
}

// UserConsents is GET /push/users/{id}/consents's answer.
type UserConsents struct {
	UserID   uint64    `json:"user_id"`
	Consents []Consent `json:"consents"`
}

// History is GET /push/users/{id}/consents/{category}/history's answer.
type History struct {
	History []consent.Record `json:"history"`
}

// DuePage is GET /push/consents/due's answer: next is absent on the last
// page.
type DuePage struct {
	Consents []Consent `json:"consents"`
	Next     string    `json:"next,omitempty"`
	Cutoff   time.Time `json:"cutoff"`
}

func viewConsent(c model.Consent) Consent {
	v := Consent{UserID: c.UserID, Category: c.Category, Granted: c.Granted, Night: c.Night, Source: c.Source}
	if !c.Updated.IsZero() {
		v.Updated, v.Changed = &c.Updated, &c.Changed
	}
	return v
}

func viewConsents(cs []model.Consent) []Consent {
	out := make([]Consent, len(cs))
	for i, c := range cs {
		out[i] = viewConsent(c)
	}
	return out
}
