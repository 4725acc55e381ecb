// Package keys is the API's routes of the API keys kept in the database
// (docs/api.md#api-keys): create (the key shown once), list (never a
// secret; each key's last use) and revoke.
//
// HTTP only, like package server, which registers the routes in its /push
// group behind its auth (every route here needs the admin role:
// server.neededRole) and passes in what they need of it: its strict
// decoding, the actor of the request, its clock. Package apikey checks
// every create; its *apikey.FieldError names the field, which the
// server's one error handler answers as a 400, and apikey.ErrNotFound is
// a 404.
package keys

import (
	"context"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"pushfan/apikey"
	"pushfan/model"
)

// Domain is the API keys: apikey.Keys.
type Domain interface {
	Create(ctx context.Context, sp apikey.Spec) (apikey.Created, error)
	List(ctx context.Context) ([]apikey.Key, error)
	Revoke(ctx context.Context, id string, by model.Actor) (apikey.Key, error)
}

// Routes serve the API keys.
type Routes struct {
	Domain Domain
	// Decode decodes a request body strictly (unknown fields, wrong
	// types and trailing data refused, naming the field).
	Decode func(body io.Reader, v any) error
	// Actor is who the request acts for: who created or revoked a key.
	Actor func(c echo.Context) model.Actor
	// EveryApp refuses a caller limited to some apps: such a caller could
	// otherwise make itself a key of every app.
	EveryApp echo.MiddlewareFunc
}

// Register serves the routes in g (the /push group).
func (r *Routes) Register(g *echo.Group) {
	g.POST("/keys", r.create, r.EveryApp)
	g.GET("/keys", r.list, r.EveryApp)
	g.DELETE("/keys/:id", r.revoke, r.EveryApp)
}

// createRequest is the body of POST /push/keys.
type createRequest struct {
	Name      string   `json:"name"`
	Role      string   `json:"role"`
	Apps      []string `json:"apps"`
	ExpiresIn string   `json:"expires_in"`
}

// List is GET /push/keys's answer.
type List struct {
	Keys []apikey.Key `json:"keys"`
}

func (r *Routes) create(c echo.Context) error {
	var req createRequest
	if err := r.Decode(c.Request().Body, &req); err != nil {
		return err
	}
	k, err := r.Domain.Create(c.Request().Context(), apikey.Spec{Name: req.Name, Role: req.Role, Apps: req.Apps, ExpiresIn: req.ExpiresIn, By: r.Actor(c)})
	if err != nil {
		return err
	}
	// The secret is in this answer only: no cache may keep it.
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, k)
}

func (r *Routes) list(c echo.Context) error {
	ks, err := r.Domain.List(c.Request().Context())
	if err != nil {
		return err
	}
	if ks == nil {
		ks = []apikey.Key{}
	}
	return c.JSON(http.StatusOK, List{Keys: ks})
}

func (r *Routes) revoke(c echo.Context) error {
	if _, err := r.Domain.Revoke(c.Request().Context(), c.Param("id"), r.Actor(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
