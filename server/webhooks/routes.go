// Package webhooks is the API's routes of the webhook endpoints
// (docs/webhooks.md): each endpoint's health, its deliveries, a
// redelivery and re-enabling a disabled endpoint.
//
// HTTP only, like package server, which registers the routes in its
// /push group behind its auth (a viewer reads, an admin redelivers and
// enables) and refuses callers limited to some apps (the endpoints serve
// the whole deployment).
package webhooks

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/server/apierror"
	"pushfan/webhook"
)

// Routes serve the webhook endpoints of Deliverer (nil: none configured,
// an empty list).
type Routes struct {
	Deliverer *webhook.Deliverer
}

// Register adds the routes to g, each behind mw.
func (r *Routes) Register(g *echo.Group, mw ...echo.MiddlewareFunc) {
	g.GET("/webhooks", r.list, mw...)
	g.GET("/webhooks/:name/deliveries", r.deliveries, mw...)
	g.POST("/webhooks/:name/deliveries/:id/redeliver", r.redeliver, mw...)
	g.POST("/webhooks/:name/enable", r.enable, mw...)
}

type webhookView struct {
	Name        string     `json:"name"`
	URL         string     `json:"url"`
	LastSuccess *time.Time `json:"last_success"`
	Failing     int        `json:"consecutive_failures"`
	Queued      int64      `json:"queued"`
	Disabled    *time.Time `json:"disabled_at"`
	DisabledFor *string    `json:"disabled_reason"`
}

type deliveryView struct {
	ID          uint64     `json:"id"`
	WebhookID   string     `json:"webhook_id"`
	Type        string     `json:"type"`
	BroadcastID *uint64    `json:"broadcast_id"`
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	LastStatus  *int       `json:"last_status"`
	LastError   *string    `json:"last_error"`
	CreatedAt   time.Time  `json:"created_at"`
	NextAt      *time.Time `json:"next_attempt_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
}

// list is GET /push/webhooks: each endpoint and its health.
func (r *Routes) list(c echo.Context) error {
	if r.Deliverer == nil {
		return c.JSON(http.StatusOK, map[string]any{"webhooks": []webhookView{}})
	}
	hs, err := r.Deliverer.Status(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]webhookView, len(hs))
	for i, h := range hs {
		out[i] = webhookView{Name: h.Name, URL: h.URL, LastSuccess: h.LastSuccess, Failing: h.Failing, Queued: h.Queued, Disabled: h.Disabled}
		if h.Disabled != nil {
			out[i].DisabledFor = &h.DisabledFor
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"webhooks": out})
}

// deliveries is GET /push/webhooks/{name}/deliveries: newest first, by
// keyset (?cursor=), optionally of one broadcast (?broadcast_id=).
func (r *Routes) deliveries(c echo.Context) error {
	limit := 50
	if q := c.QueryParam("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > 500 {
			return apierror.BadRequest("invalid_value", "limit", "limit must be an integer from 1 to 500")
		}
		limit = n
	}
	var before, bid uint64
	if q := c.QueryParam("cursor"); q != "" {
		n, err := strconv.ParseUint(q, 10, 64)
		if err != nil || n == 0 {
			return apierror.BadRequest("invalid_cursor", "cursor", "cursor %q is not one this API returned", q)
		}
		before = n
	}
	if q := c.QueryParam("broadcast_id"); q != "" {
		n, err := strconv.ParseUint(q, 10, 64)
		if err != nil || n == 0 {
			return apierror.BadRequest("invalid_value", "broadcast_id", "broadcast_id must be a broadcast's id")
		}
		bid = n
	}
	if r.Deliverer == nil {
		return noEndpoint(c.Param("name"))
	}
	ds, err := r.Deliverer.Deliveries(c.Request().Context(), c.Param("name"), bid, before, limit+1)
	if errors.Is(err, webhook.ErrNotFound) {
		return noEndpoint(c.Param("name"))
	}
	if err != nil {
		return err
	}
	page := struct {
		Deliveries []deliveryView `json:"deliveries"`
		NextCursor *string        `json:"next_cursor"`
	}{Deliveries: make([]deliveryView, 0, min(len(ds), limit))}
	for i, d := range ds {
		if i == limit {
			next := strconv.FormatUint(ds[limit-1].ID, 10)
			page.NextCursor = &next
			break
		}
		v := deliveryView{ID: d.ID, WebhookID: d.MsgID, Type: d.Type, BroadcastID: d.BroadcastID, Status: d.Status, Attempts: d.Attempts,
			LastStatus: d.LastStatus, LastError: d.LastError, CreatedAt: d.CreatedAt, DeliveredAt: d.DeliveredAt}
		if d.Status == "pending" {
			at := d.NextAt
			v.NextAt = &at
		}
		page.Deliveries = append(page.Deliveries, v)
	}
	return c.JSON(http.StatusOK, page)
}

// redeliver is POST /push/webhooks/{name}/deliveries/{id}/redeliver: that
// event again, at once, with its webhook-id.
func (r *Routes) redeliver(c echo.Context) error {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || id == 0 {
		return apierror.BadRequest("invalid_value", "id", "id must be a delivery's id")
	}
	if r.Deliverer == nil {
		return noEndpoint(c.Param("name"))
	}
	err = r.Deliverer.Redeliver(c.Request().Context(), c.Param("name"), id)
	if errors.Is(err, webhook.ErrNotFound) {
		return &apierror.Error{Status: http.StatusNotFound, Code: "not_found", Message: "no such delivery of webhook " + c.Param("name")}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"id": id, "status": "pending"})
}

// enable is POST /push/webhooks/{name}/enable: a disabled endpoint
// back, its waiting events due now.
func (r *Routes) enable(c echo.Context) error {
	if r.Deliverer == nil {
		return noEndpoint(c.Param("name"))
	}
	err := r.Deliverer.Enable(c.Request().Context(), c.Param("name"))
	if errors.Is(err, webhook.ErrNotFound) {
		return noEndpoint(c.Param("name"))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"name": c.Param("name"), "enabled": true})
}

func noEndpoint(name string) error {
	return &apierror.Error{Status: http.StatusNotFound, Code: "not_found", Message: "no webhook endpoint named " + name}
}
