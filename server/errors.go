package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"pushfan/apikey"
	"pushfan/audit"
	"pushfan/broadcast"
	"pushfan/broadcast/rules"
	"pushfan/consent"
	"pushfan/segment"
	"pushfan/server/apierror"
)

// APIError is the API's error (package apierror): a status, a stable
// snake_case code and a human message; every 4xx the API returns is one.
type APIError = apierror.Error

func badRequest(code, field, format string, args ...any) *APIError {
	return apierror.BadRequest(code, field, format, args...)
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Problems: a failed reload's every problem.
	Problems []string `json:"problems,omitempty"`
}

// errorHandler is the one place errors become responses: typed errors keep
// their status and message; anything unknown is logged and becomes a generic
// 500 that leaks nothing.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	apiErr := s.toAPIError(err, c)
	if apiErr.Status >= 500 {
		s.log.ErrorContext(c.Request().Context(), "request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
	}
	body := errorBody{Error: errorDetail{Code: apiErr.Code, Message: apiErr.Message, Field: apiErr.Field, Problems: apiErr.Problems}}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(apiErr.Status)
		return
	}
	_ = c.JSON(apiErr.Status, body)
}

func (s *Server) toAPIError(err error, c echo.Context) *APIError {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr
	}
	var fe *rules.FieldError
	if errors.As(err, &fe) {
		return &APIError{Status: http.StatusBadRequest, Code: fe.Code, Field: fe.Field, Message: fe.Message}
	}
	var ce *consent.FieldError
	if errors.As(err, &ce) {
		return &APIError{Status: http.StatusBadRequest, Code: ce.Code, Field: ce.Field, Message: ce.Message}
	}
	var ae *audit.FieldError
	if errors.As(err, &ae) {
		return &APIError{Status: http.StatusBadRequest, Code: ae.Code, Field: ae.Field, Message: ae.Message}
	}
	var ke *apikey.FieldError
	if errors.As(err, &ke) {
		return &APIError{Status: http.StatusBadRequest, Code: ke.Code, Field: ke.Field, Message: ke.Message}
	}
	var se *segment.FieldError
	if errors.As(err, &se) {
		return &APIError{Status: http.StatusBadRequest, Code: se.Code, Field: se.Field, Message: se.Message}
	}
	switch {
	case errors.Is(err, apikey.ErrNotFound):
		return &APIError{Status: http.StatusNotFound, Code: "key_not_found", Message: "no API key with id " + strconv.Quote(c.Param("id"))}
	case errors.Is(err, segment.ErrNotFound):
		return &APIError{Status: http.StatusNotFound, Code: "segment_not_found", Message: "no segment " + strconv.Quote(c.Param("name")) + versionOf(c)}
	case errors.Is(err, segment.ErrExists):
		return &APIError{Status: http.StatusConflict, Code: "segment_exists", Field: "name", Message: "a segment with this name exists; update it with PUT /push/segments/{name}, or choose another name"}
	case errors.Is(err, broadcast.ErrNotFound):
		return &APIError{Status: http.StatusNotFound, Code: "not_found", Message: "no broadcast with id " + c.Param("id")}
	case errors.Is(err, broadcast.ErrFinished):
		return &APIError{Status: http.StatusConflict, Code: "already_finished", Message: "the broadcast has already finished and cannot be canceled"}
	case errors.Is(err, context.DeadlineExceeded):
		// Every database call has a deadline; hitting it means MySQL is
		// stuck or overloaded, which a client may retry.
		return &APIError{Status: http.StatusServiceUnavailable, Code: "database_timeout", Message: "the database did not answer in time; retry later"}
	case errors.Is(err, broadcast.ErrIdempotencyConflict):
		return &APIError{Status: http.StatusConflict, Code: "idempotency_key_conflict", Field: "Idempotency-Key", Message: "this Idempotency-Key was already used for a different request; use a new key for a new broadcast"}
	case errors.Is(err, broadcast.ErrShuttingDown):
		return &APIError{Status: http.StatusServiceUnavailable, Code: "shutting_down", Message: "this instance is shutting down; retry on another instance"}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return &APIError{Status: he.Code, Code: "route_not_found", Message: "no such route: " + c.Request().Method + " " + c.Request().URL.Path}
		case http.StatusMethodNotAllowed:
			return &APIError{Status: he.Code, Code: "method_not_allowed", Message: c.Request().Method + " is not allowed on " + c.Request().URL.Path}
		case http.StatusRequestEntityTooLarge:
			return &APIError{Status: he.Code, Code: "body_too_large", Message: fmt.Sprintf("the request body is larger than the %d-byte limit", s.cfg.Limits.Body)}
		case http.StatusUnsupportedMediaType:
			return &APIError{Status: he.Code, Code: "unsupported_media_type", Message: "send the body as application/json"}
		}
		if he.Code < 500 {
			return &APIError{Status: he.Code, Code: snake(http.StatusText(he.Code)), Message: fmt.Sprint(he.Message)}
		}
	}
	return &APIError{Status: http.StatusInternalServerError, Code: "internal_error", Message: "an internal error occurred; the server log has details (request id " + c.Response().Header().Get(echo.HeaderXRequestID) + ")"}
}

// versionOf is " version N" on a version's route, for its 404.
func versionOf(c echo.Context) string {
	if v := c.Param("version"); v != "" {
		return " with version " + v
	}
	return ""
}

func snake(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		switch {
		case r >= 'A' && r <= 'Z':
			out = append(out, r+'a'-'A')
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			out = append(out, r)
		default:
			if len(out) > 0 && out[len(out)-1] != '_' {
				out = append(out, '_')
			}
		}
	}
	return string(out)
}
