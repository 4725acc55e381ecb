// Package templates is the API's routes of the message templates
// (docs/api.md#message-templates): list, create, replace and delete the
// named title, body, data and link a team reuses when composing.
//
// HTTP only, like package server, which registers the routes in its /push
// group behind its auth (server.neededRole: a viewer lists, a sender
// saves and deletes; the templates are the whole deployment's, as a
// message's text is no app's). Package msgtemplate checks and stores
// every write, its audit entry in the write's transaction; its
// *msgtemplate.FieldError becomes a 400 naming the field here.
//
// The list also carries the deployment's public URL (PUSHFAN_PUBLIC_URL):
// the console warns of a message link that leads elsewhere.
package templates

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"pushfan/msgtemplate"
	"pushfan/server/apierror"
)

// Domain keeps the templates: msgtemplate.Store.
type Domain interface {
	List(ctx context.Context) ([]msgtemplate.Template, error)
	Create(ctx context.Context, sp msgtemplate.Spec) (msgtemplate.Template, error)
	Update(ctx context.Context, sp msgtemplate.Spec) (msgtemplate.Template, error)
	Delete(ctx context.Context, name string) error
}

// Routes serve the templates of Domain (nil: the routes answer 503). The
// wiring sets Domain and PublicURL; the server passes the rest to
// Register.
type Routes struct {
	Domain Domain
	// PublicURL is PUSHFAN_PUBLIC_URL ("" when unset).
	PublicURL string
	// decode decodes a request body strictly (unknown fields, wrong
	// types and trailing data refused, naming the field); actor is the
	// display name of who the request acts for.
	decode func(body io.Reader, v any) error
	actor  func(c echo.Context) string
}

// Register serves the routes of a copy of r in g (the /push group).
func (r Routes) Register(g *echo.Group, decode func(io.Reader, any) error, actor func(echo.Context) string) {
	r.decode, r.actor = decode, actor
	g.GET("/templates", r.list)
	g.POST("/templates", r.create)
	g.PUT("/templates/:name", r.update)
	g.DELETE("/templates/:name", r.remove)
}

// body is a write's request: POST names the template, PUT's path does.
type body struct {
	Name  *string           `json:"name,omitempty"`
	Title string            `json:"title"`
	Body  string            `json:"body"`
	Data  map[string]string `json:"data"`
	Link  string            `json:"link"`
}

// List is GET /push/templates's answer.
type List struct {
	Templates []msgtemplate.Template `json:"templates"`
	PublicURL *string                `json:"public_url"`
}

func (r *Routes) ready() error {
	if r.Domain == nil {
		return &apierror.Error{Status: http.StatusServiceUnavailable, Code: "templates_unavailable", Message: "this instance keeps no message templates"}
	}
	return nil
}

func (r *Routes) list(c echo.Context) error {
	if err := r.ready(); err != nil {
		return err
	}
	ts, err := r.Domain.List(c.Request().Context())
	if err != nil {
		return err
	}
	out := List{Templates: ts}
	if r.PublicURL != "" {
		out.PublicURL = &r.PublicURL
	}
	return c.JSON(http.StatusOK, out)
}

func (r *Routes) create(c echo.Context) error {
	if err := r.ready(); err != nil {
		return err
	}
	var b body
	if err := r.decode(c.Request().Body, &b); err != nil {
		return err
	}
	if b.Name == nil {
		return apierror.BadRequest("required", "name", "name is required: a short name your team will recognise, such as \"winter-sale\"")
	}
	t, err := r.Domain.Create(c.Request().Context(), r.spec(c, *b.Name, b))
	if err != nil {
		return answer(err, *b.Name)
	}
	return c.JSON(http.StatusCreated, t)
}

func (r *Routes) update(c echo.Context) error {
	if err := r.ready(); err != nil {
		return err
	}
	var b body
	if err := r.decode(c.Request().Body, &b); err != nil {
		return err
	}
	name, err := pathName(c)
	if err != nil {
		return err
	}
	if b.Name != nil && *b.Name != name {
		return apierror.BadRequest("invalid_value", "name", "name %s differs from the path's %s: a template is renamed by saving it under the new name and deleting the old", strconv.Quote(*b.Name), strconv.Quote(name))
	}
	t, err := r.Domain.Update(c.Request().Context(), r.spec(c, name, b))
	if err != nil {
		return answer(err, name)
	}
	return c.JSON(http.StatusOK, t)
}

func (r *Routes) remove(c echo.Context) error {
	if err := r.ready(); err != nil {
		return err
	}
	name, err := pathName(c)
	if err != nil {
		return err
	}
	if err := r.Domain.Delete(c.Request().Context(), name); err != nil {
		return answer(err, name)
	}
	return c.NoContent(http.StatusNoContent)
}

func (r *Routes) spec(c echo.Context, name string, b body) msgtemplate.Spec {
	return msgtemplate.Spec{Name: name, Title: b.Title, Body: b.Body, Data: b.Data, Link: b.Link, By: r.actor(c)}
}

// answer is the API's error for a domain error: a field error a 400, a
// missing template a 404, a taken name a 409; anything else as it is (a
// 500 the server's handler logs).
func answer(err error, name string) error {
	var fe *msgtemplate.FieldError
	switch {
	case errors.As(err, &fe):
		return apierror.BadRequest(fe.Code, fe.Field, "%s", fe.Message)
	case errors.Is(err, msgtemplate.ErrNotFound):
		return apierror.NotFound("template_not_found", "no template named %s", strconv.Quote(name))
	case errors.Is(err, msgtemplate.ErrExists):
		return &apierror.Error{Status: http.StatusConflict, Code: "template_exists", Field: "name",
			Message: "a template named " + strconv.Quote(name) + " exists: PUT /push/templates/{name} replaces it"}
	}
	return err
}

// pathName is the template's name from the path. Echo routes on the raw
// path when the request has one (a name holding &, +, :, = and the like,
// escaped by the console, gives one) and leaves the parameter escaped
// then ("Q%26A"); otherwise on the decoded path, with the parameter as the
// name ("50%").
func pathName(c echo.Context) (string, error) {
	name := c.Param("name")
	if c.Request().URL.RawPath == "" {
		return name, nil
	}
	name, err := url.PathUnescape(name)
	if err != nil {
		return "", apierror.BadRequest("invalid_value", "name", "the path's template name %q is not a valid escape: %v", c.Param("name"), err)
	}
	return name, nil
}
