// Package segments is the API's routes of the saved segments
// (docs/segments.md): create, a new version, read with the versions,
// list, delete, one version, the fields a filter may name, the values
// present for one of them, and the preview that counts a filter as the
// console builds it.
//
// HTTP only, like package server, which registers the routes in its
// /push group (behind its auth: a viewer reads, a sender writes) and
// passes in what they need of it: its strict decoding, the name of the
// token that authenticated a request, its clock, the previews' budget.
// The catalog (package segment) checks every write; every refusal, the
// routes' own (a version that is not a number) included, is a
// *segment.FieldError naming the field (filter.and[2].op), which the
// server's one error handler answers as a 400; segment.ErrNotFound is a
// 404 and segment.ErrExists a 409.
package segments

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/model"
	"pushfan/segment"
	"pushfan/segment/filter"
)

// Domain is the saved segments: segment.Catalog.
type Domain interface {
	Create(ctx context.Context, w segment.Write) (model.Segment, error)
	Update(ctx context.Context, w segment.Write) (model.Segment, error)
	Get(ctx context.Context, name string) (model.Segment, error)
	List(ctx context.Context) ([]model.Segment, error)
	Delete(ctx context.Context, name string, at time.Time) error
	Version(ctx context.Context, name string, version int) (model.SegmentVersion, error)
	Preview(ctx context.Context, filter json.RawMessage, exact bool) (segment.Preview, error)
	// Fields are the fields a filter may name on this deployment's schema
	// (the built-in ones it has columns for, and its attributes).
	Fields() filter.Fields
	// Values are the values present for one field (platform, locale, a
	// string attribute), the most common first: a *segment.FieldError
	// naming field for a field with none to suggest.
	Values(ctx context.Context, field string) (segment.Values, error)
}

// Routes serve the saved segments.
type Routes struct {
	Domain Domain
	// Decode decodes a request body strictly (unknown fields, wrong
	// types and trailing data refused, naming the field).
	Decode func(body io.Reader, v any) error
	// Actor is the name of the token that authenticated the request:
	// who wrote a version.
	Actor func(c echo.Context) string
	Now   func() time.Time
	// Previews is the previews' budget (one per token, shared with the
	// audiences' previews); nil for none.
	Previews echo.MiddlewareFunc
}

// Register serves the routes in g (the /push group). A write needs a
// sender token: the group's auth refuses a viewer's POST, PUT and DELETE.
// The preview's, the fields' and the values' paths are not segments':
// no segment may be so named (reservedRoute).
func (r *Routes) Register(g *echo.Group) {
	var budget []echo.MiddlewareFunc
	if r.Previews != nil {
		budget = append(budget, r.Previews)
	}
	g.POST("/segments/preview", r.preview, budget...)
	g.GET("/segments/fields", r.fields)
	g.GET("/segments/values", r.values)
	g.POST("/segments", r.create)
	g.GET("/segments", r.list)
	g.GET("/segments/:name", r.get)
	g.PUT("/segments/:name", r.update)
	g.DELETE("/segments/:name", r.delete)
	g.GET("/segments/:name/versions/:version", r.version)
}

// reservedRoute is the route whose path segment under /push/segments
// name is, if it is one: no segment may be so called, since GET
// /push/segments/fields would not reach a segment called fields.
func reservedRoute(name string) (route string, ok bool) {
	switch name {
	case "preview":
		return "POST /push/segments/preview", true
	case "fields":
		return "GET /push/segments/fields", true
	case "values":
		return "GET /push/segments/values", true
	}
	return "", false
}

// createRequest is the body of POST /push/segments.
type createRequest struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Filter      json.RawMessage `json:"filter"`
}

// updateRequest is the body of PUT /push/segments/{name}: without a
// description, the current one is kept.
type updateRequest struct {
	Description *string         `json:"description"`
	Filter      json.RawMessage `json:"filter"`
}

// previewRequest is the body of POST /push/segments/preview.
type previewRequest struct {
	Filter json.RawMessage `json:"filter"`
	Exact  bool            `json:"exact"`
}

// FieldInfo is one field a filter may name, as GET /push/segments/fields
// lists it: its kind (string, int, bool, date, time, version) and the
// operators that kind takes, so that a builder offers only those.
type FieldInfo struct {
	Name string   `json:"name"`
	Kind string   `json:"kind"`
	Ops  []string `json:"ops"`
}

// FieldList is GET /push/segments/fields's answer, sorted by name.
type FieldList struct {
	Fields []FieldInfo `json:"fields"`
}

// List is GET /push/segments's answer.
type List struct {
	Segments []model.Segment `json:"segments"`
}

func refuse(field, code, message string) *segment.FieldError {
	return &segment.FieldError{Field: field, Code: code, Message: message}
}

func (r *Routes) create(c echo.Context) error {
	var req createRequest
	if err := r.Decode(c.Request().Body, &req); err != nil {
		return err
	}
	if route, ok := reservedRoute(req.Name); ok {
		return refuse("name", "invalid_name", strconv.Quote(req.Name)+" is a path of the API ("+route+"), not a segment's name")
	}
	w := segment.Write{Name: req.Name, Description: &req.Description, Filter: req.Filter, By: r.Actor(c), At: r.Now()}
	seg, err := r.Domain.Create(c.Request().Context(), w)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, seg)
}

func (r *Routes) update(c echo.Context) error {
	var req updateRequest
	if err := r.Decode(c.Request().Body, &req); err != nil {
		return err
	}
	w := segment.Write{Name: c.Param("name"), Description: req.Description, Filter: req.Filter, By: r.Actor(c), At: r.Now()}
	seg, err := r.Domain.Update(c.Request().Context(), w)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, seg)
}

func (r *Routes) list(c echo.Context) error {
	segs, err := r.Domain.List(c.Request().Context())
	if err != nil {
		return err
	}
	if segs == nil {
		segs = []model.Segment{}
	}
	return c.JSON(http.StatusOK, List{Segments: segs})
}

func (r *Routes) get(c echo.Context) error {
	seg, err := r.Domain.Get(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	if seg.Versions == nil {
		seg.Versions = []model.SegmentVersion{}
	}
	return c.JSON(http.StatusOK, seg)
}

func (r *Routes) delete(c echo.Context) error {
	if err := r.Domain.Delete(c.Request().Context(), c.Param("name"), r.Now()); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (r *Routes) version(c echo.Context) error {
	n, err := strconv.Atoi(c.Param("version"))
	if err != nil || n < 1 {
		return refuse("version", "invalid_version", "version "+strconv.Quote(c.Param("version"))+" is not a positive integer")
	}
	v, err := r.Domain.Version(c.Request().Context(), c.Param("name"), n)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// fields lists the fields of this deployment's schema: the console's
// segment builder offers them (and each kind's operators) rather than
// learning them from refusals.
func (r *Routes) fields(c echo.Context) error {
	fs := r.Domain.Fields()
	out := FieldList{Fields: make([]FieldInfo, 0, len(fs))}
	for _, name := range fs.Names() {
		f := fs[name]
		out.Fields = append(out.Fields, FieldInfo{Name: name, Kind: string(f.Kind), Ops: filter.Ops(f.Kind)})
	}
	return c.JSON(http.StatusOK, out)
}

// values lists the values present for ?field= (the most common first,
// with their tokens): the builder offers them for a condition's value.
// A GET, so a viewer may read it; it does not spend the previews' budget,
// its read being bounded whatever the tables (segment.Values).
func (r *Routes) values(c echo.Context) error {
	v, err := r.Domain.Values(c.Request().Context(), c.QueryParam("field"))
	if err != nil {
		return err
	}
	if v.Values == nil {
		v.Values = []segment.Value{}
	}
	return c.JSON(http.StatusOK, v)
}

func (r *Routes) preview(c echo.Context) error {
	var req previewRequest
	if err := r.Decode(c.Request().Body, &req); err != nil {
		return err
	}
	p, err := r.Domain.Preview(c.Request().Context(), req.Filter, req.Exact)
	if err != nil {
		return err
	}
	if p.Sample == nil {
		p.Sample = []uint64{}
	}
	return c.JSON(http.StatusOK, p)
}
