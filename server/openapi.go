package server

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPI serves the API's contract, GET /openapi.json. It needs no token,
// like the probes: the document describes the API and holds no secret, and
// a client generator must be able to read it before it has a token.
func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, s.openAPIDoc)
}
