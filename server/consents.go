package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/consent"
	"pushfan/internal/platform/logging"
	"pushfan/model"
)

// The categories and the bundled consent table (docs/consent.md): the
// console's category picker, and each user's answers for the categories
// whose consent is `table`, recorded with their proof and listed when due
// for reconfirmation. The domain's rules (package consent) refuse what
// the table cannot hold, naming the field.

// listCategories answers the configured categories, as broadcasts run
// under them, and the default one.
func (s *Server) listCategories(c echo.Context) error {
	out := struct {
		Categories      []model.Category `json:"categories"`
		DefaultCategory string           `json:"default_category,omitempty"`
	}{Categories: s.dom.Categories.List, DefaultCategory: s.dom.Categories.Default}
	if out.Categories == nil {
		out.Categories = []model.Category{}
	}
	return c.JSON(http.StatusOK, out)
}

// consentRequest is the body of PUT /push/users/{id}/consents/{category}.
type consentRequest struct {
	Granted *bool  `json:"granted"` // required: an answer is never assumed
	Night   bool   `json:"night"`
	Source  string `json:"source"`
}

// consentView is one user's consent to one category; a category never
// answered has no times.
type consentView struct {
	UserID   uint64     `json:"user_id"`
	Category string     `json:"category"`
	Granted  bool       `json:"granted"`
	Night    bool       `json:"night"`
	Source   string     `json:"source"`
	Updated  *time.Time `json:"updated_at,omitempty"`
	Changed  *time.Time `json:"changed_at,omitempty"`
}

func viewConsent(c model.Consent) consentView {
	v := consentView{UserID: c.UserID, Category: c.Category, Granted: c.Granted, Night: c.Night, Source: c.Source}
	if !c.Updated.IsZero() {
		v.Updated, v.Changed = &c.Updated, &c.Changed
	}
	return v
}

func viewConsents(cs []model.Consent) []consentView {
	out := make([]consentView, len(cs))
	for i, c := range cs {
		out[i] = viewConsent(c)
	}
	return out
}

// parseUserID is the path's user id: a positive integer, else a 400
// naming id.
func parseUserID(c echo.Context) (uint64, error) {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || id == 0 {
		return 0, badRequest("invalid_id", "id", "user id %q is not a positive integer", c.Param("id"))
	}
	return id, nil
}

// queryLimit is ?limit=, from 1 to most, def without one.
func queryLimit(c echo.Context, def, most int) (int, error) {
	q := c.QueryParam("limit")
	if q == "" {
		return def, nil
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < 1 || n > most {
		return 0, badRequest("invalid_value", "limit", "limit must be an integer from 1 to %d", most)
	}
	return n, nil
}

// putConsent records a user's answer for a category (sender role: the
// auth refuses a viewer's PUT) and answers the consent as stored. The
// history keeps who recorded it (the token's name) and the request id.
func (s *Server) putConsent(c echo.Context) error {
	id, err := parseUserID(c)
	if err != nil {
		return err
	}
	var req consentRequest
	if err := decodeStrict(c.Request().Body, &req); err != nil {
		return err
	}
	if req.Granted == nil {
		return badRequest("missing_field", "granted", "granted is required: true when the user consents to the category, false when they do not")
	}
	a := consent.Answer{Granted: *req.Granted, Night: req.Night, Source: req.Source, RequestID: logging.RequestID(c.Request().Context())}
	if t := caller(c); t != nil {
		a.Actor = t.Name
	}
	got, err := s.dom.Consents.Set(c.Request().Context(), id, c.Param("category"), a)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewConsent(got))
}

// getConsents answers the user's consent for every category kept in the
// bundled table.
func (s *Server) getConsents(c echo.Context) error {
	id, err := parseUserID(c)
	if err != nil {
		return err
	}
	cs, err := s.dom.Consents.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, struct {
		UserID   uint64        `json:"user_id"`
		Consents []consentView `json:"consents"`
	}{UserID: id, Consents: viewConsents(cs)})
}

// consentHistory answers the user's answers for a category, newest first:
// the proof of what they answered, when, and who recorded it.
func (s *Server) consentHistory(c echo.Context) error {
	id, err := parseUserID(c)
	if err != nil {
		return err
	}
	limit, err := queryLimit(c, 50, 500)
	if err != nil {
		return err
	}
	h, err := s.dom.Consents.History(c.Request().Context(), id, c.Param("category"), limit)
	if err != nil {
		return err
	}
	if h == nil {
		h = []consent.Record{}
	}
	return c.JSON(http.StatusOK, struct {
		History []consent.Record `json:"history"`
	}{History: h})
}

// dueConsents pages the consents due for reconfirmation: granted, last
// given or confirmed before now minus consent.ReconfirmYears years.
// ?category= narrows them to one category, ?after= is the previous page's
// next.
func (s *Server) dueConsents(c echo.Context) error {
	limit, err := queryLimit(c, 100, 1000)
	if err != nil {
		return err
	}
	cutoff := consent.Cutoff(s.now())
	p, err := s.dom.Consents.Due(c.Request().Context(), c.QueryParam("category"), cutoff, c.QueryParam("after"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, struct {
		Consents []consentView `json:"consents"`
		Next     string        `json:"next,omitempty"`
		Cutoff   time.Time     `json:"cutoff"`
	}{Consents: viewConsents(p.Consents), Next: p.Next, Cutoff: cutoff})
}
