package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/webhook"
)

// WithWebhooks serves the webhook endpoints' health and deliveries.
func WithWebhooks(d *webhook.Deliverer) Option { return func(s *Server) { s.extra.webhooks = d } }

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

// listWebhooks is GET /push/webhooks: each endpoint and its health.
func (s *Server) listWebhooks(c echo.Context) error {
	if s.extra.webhooks == nil {
		return c.JSON(http.StatusOK, map[string]any{"webhooks": []webhookView{}})
	}
	hs, err := s.extra.webhooks.Status(c.Request().Context())
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

// listDeliveries is GET /push/webhooks/{name}/deliveries: newest first, by
// keyset (?cursor=), optionally of one broadcast (?broadcast_id=).
func (s *Server) listDeliveries(c echo.Context) error {
	limit := 50
	if q := c.QueryParam("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > 500 {
			return badRequest("invalid_value", "limit", "limit must be an integer from 1 to 500")
		}
		limit = n
	}
	var before, bid uint64
	if q := c.QueryParam("cursor"); q != "" {
		n, err := strconv.ParseUint(q, 10, 64)
		if err != nil || n == 0 {
			return badRequest("invalid_cursor", "cursor", "cursor %q is not one this API returned", q)
		}
		before = n
	}
	if q := c.QueryParam("broadcast_id"); q != "" {
		n, err := strconv.ParseUint(q, 10, 64)
		if err != nil || n == 0 {
			return badRequest("invalid_value", "broadcast_id", "broadcast_id must be a broadcast's id")
		}
		bid = n
	}
	if s.extra.webhooks == nil {
		return noEndpoint(c.Param("name"))
	}
	ds, err := s.extra.webhooks.Deliveries(c.Request().Context(), c.Param("name"), bid, before, limit+1)
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
func (s *Server) redeliver(c echo.Context) error {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || id == 0 {
		return badRequest("invalid_value", "id", "id must be a delivery's id")
	}
	if s.extra.webhooks == nil {
		return noEndpoint(c.Param("name"))
	}
	err = s.extra.webhooks.Redeliver(c.Request().Context(), c.Param("name"), id)
	if errors.Is(err, webhook.ErrNotFound) {
		return &APIError{Status: http.StatusNotFound, Code: "not_found", Message: "no such delivery of webhook " + c.Param("name")}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"id": id, "status": "pending"})
}

// enableWebhook is POST /push/webhooks/{name}/enable: a disabled endpoint
// back, its waiting events due now.
func (s *Server) enableWebhook(c echo.Context) error {
	if s.extra.webhooks == nil {
		return noEndpoint(c.Param("name"))
	}
	err := s.extra.webhooks.Enable(c.Request().Context(), c.Param("name"))
	if errors.Is(err, webhook.ErrNotFound) {
		return noEndpoint(c.Param("name"))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"name": c.Param("name"), "enabled": true})
}

func noEndpoint(name string) error {
	return &APIError{Status: http.StatusNotFound, Code: "not_found", Message: "no webhook endpoint named " + name}
}
