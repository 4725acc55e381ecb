// Package consents is the API's routes of the message categories and the
// bundled consent table (docs/consent.md): the console's category picker,
// and each user's answers for the categories whose consent is `table`,
// recorded with their proof and listed when due for reconfirmation.
//
// HTTP only, like package server, which registers the routes in its
// /push group (behind its auth) and passes in what they need of it: its
// strict decoding, the name of the token that authenticated a request,
// its clock. The domain's rules (package consent) refuse what the table
// cannot hold; every refusal, the routes' own (an id, a limit, a missing
// granted) included, is a *consent.FieldError, which the server's one
// error handler answers as a 400 naming the field.
package consents

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/consent"
	"pushfan/model"
)

// Domain records and reads the bundled consent table: consent.Book.
type Domain interface {
	Set(ctx context.Context, userID uint64, category string, a consent.Answer) (model.Consent, error)
	Get(ctx context.Context, userID uint64) ([]model.Consent, error)
	History(ctx context.Context, userID uint64, category string, limit int) ([]consent.Record, error)
	Due(ctx context.Context, category string, cutoff time.Time, after string, limit int) (consent.DuePage, error)
}

// Categories are the message categories as the API shows them.
type Categories struct {
	// List is every category, in configuration order (empty: none
	// configured).
	List []model.Category
	// Default is the category of a broadcast that names none; "" for
	// none.
	Default string
}

// Routes serve the categories and the consents.
type Routes struct {
	Domain     Domain
	Categories Categories
	// Decode decodes a request body strictly (unknown fields, wrong
	// types and trailing data refused, naming the field).
	Decode func(body io.Reader, v any) error
	// Actor is the name of the token that authenticated the request:
	// the history's proof of who recorded an answer.
	Actor func(c echo.Context) string
	// RequestID is the request's id (X-Request-Id), kept in the history.
	RequestID func(c echo.Context) string
	Now       func() time.Time
}

// Register serves the routes in g (the /push group). A PUT needs a
// sender token: the group's auth refuses a viewer's.
func (r *Routes) Register(g *echo.Group) {
	g.GET("/categories", r.listCategories)
	g.PUT("/users/:id/consents/:category", r.put)
	g.GET("/users/:id/consents", r.get)
	g.GET("/users/:id/consents/:category/history", r.history)
	g.GET("/consents/due", r.due)
}

func refuse(field, code, message string) *consent.FieldError {
	return &consent.FieldError{Field: field, Code: code, Message: message}
}

// userID is the path's user id: a positive integer.
func userID(c echo.Context) (uint64, error) {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || id == 0 {
		return 0, refuse("id", "invalid_id", "user id "+strconv.Quote(c.Param("id"))+" is not a positive integer")
	}
	return id, nil
}

// limit is ?limit=, from 1 to most, def without one.
func limit(c echo.Context, def, most int) (int, error) {
	q := c.QueryParam("limit")
	if q == "" {
		return def, nil
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < 1 || n > most {
		return 0, refuse("limit", "invalid_value", "limit must be an integer from 1 to "+strconv.Itoa(most))
	}
	return n, nil
}

func (r *Routes) listCategories(c echo.Context) error {
	out := CategoryList{Categories: r.Categories.List, DefaultCategory: r.Categories.Default}
	if out.Categories == nil {
		out.Categories = []model.Category{}
	}
	return c.JSON(http.StatusOK, out)
}

// put records a user's answer for a category and answers the consent as
// stored.
func (r *Routes) put(c echo.Context) error {
	id, err := userID(c)
	if err != nil {
		return err
	}
	var req request
	if err := r.Decode(c.Request().Body, &req); err != nil {
		return err
	}
	if req.Granted == nil {
		return refuse("granted", "missing_field", "granted is required: true when the user consents to the category, false when they do not")
	}
	a := consent.Answer{Granted: *req.Granted, Night: req.Night, Source: req.Source, Actor: r.Actor(c), RequestID: r.RequestID(c)}
	got, err := r.Domain.Set(c.Request().Context(), id, c.Param("category"), a)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewConsent(got))
}

// get answers the user's consent for every category kept in the table.
func (r *Routes) get(c echo.Context) error {
	id, err := userID(c)
	if err != nil {
		return err
	}
	cs, err := r.Domain.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, UserConsents{UserID: id, Consents: viewConsents(cs)})
}

// history answers the user's answers for a category, newest first.
func (r *Routes) history(c echo.Context) error {
	id, err := userID(c)
	if err != nil {
		return err
	}
	n, err := limit(c, 50, 500)
	if err != nil {
		return err
	}
	h, err := r.Domain.History(c.Request().Context(), id, c.Param("category"), n)
	if err != nil {
		return err
	}
	if h == nil {
		h = []consent.Record{}
	}
	return c.JSON(http.StatusOK, History{History: h})
}

// due pages the consents due for reconfirmation (consent.Cutoff of now):
// ?category= narrows them to one, ?after= is the previous page's next.
func (r *Routes) due(c echo.Context) error {
	n, err := limit(c, 100, 1000)
	if err != nil {
		return err
	}
	cutoff := consent.Cutoff(r.Now())
	p, err := r.Domain.Due(c.Request().Context(), c.QueryParam("category"), cutoff, c.QueryParam("after"), n)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, DuePage{Consents: viewConsents(p.Consents), Next: p.Next, Cutoff: cutoff})
}
