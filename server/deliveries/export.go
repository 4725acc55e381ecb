package deliveries

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/lease/outcome"
	"pushfan/outcomes"
	"pushfan/server/apierror"
)

// flushEvery is how many lines go out before the answer is flushed: the
// first ones leave at once, and a 10M export never sits in a buffer.
const flushEvery = 1000

// exportWrite is how long a thousand lines of an export may take to read
// and write before the answer is cut (the write deadline, moved on).
const exportWrite = time.Minute

// export is GET /push/broadcasts/{id}/outcomes?outcome=&format=ndjson|csv
// &code=&user_id=: one line per kept target (user_id, token_id, outcome,
// code), streamed as the outcomes are read, a chunk at a time. code and
// user_id keep only the lines that have them: the whole broadcast is
// still read (the outcomes are kept by token, not by user or code), at
// the unfiltered export's cost.
func (r *Routes) export(c echo.Context) error {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || id == 0 {
		return apierror.BadRequest("invalid_id", "id", "broadcast id %q is not a positive integer", c.Param("id"))
	}
	var kind outcome.Kind
	if q := c.QueryParam("outcome"); q != "" {
		k, ok := outcome.ParseKind(q)
		if !ok {
			return apierror.BadRequest("invalid_value", "outcome", "outcome must be one of accepted, failed, capped, canceled, deferred, stale, excluded")
		}
		kind = k
	}
	format := c.QueryParam("format")
	switch format {
	case "":
		format = "ndjson"
	case "ndjson", "csv":
	default:
		return apierror.BadRequest("invalid_value", "format", "format must be ndjson or csv")
	}
	code := c.QueryParam("code")
	if code != "" && r.KnownCode != nil && !r.KnownCode(code) {
		return apierror.BadRequest("unknown_code", "code", "code %q is not an error code pushfan reports", code)
	}
	var user uint64
	if q := c.QueryParam("user_id"); q != "" {
		if user, err = strconv.ParseUint(q, 10, 64); err != nil || user == 0 {
			return apierror.BadRequest("invalid_value", "user_id", "user_id %q is not a user id (a positive integer)", q)
		}
	}
	if r.Domain == nil {
		return unavailable()
	}
	w := c.Response()
	// The server's write timeout (PUSHFAN_HTTP_WRITE_TIMEOUT, 60 s) bounds
	// a whole answer; a 10M export streams for longer, and a filtered one
	// can read for long between lines. Each thousand lines read moves the
	// deadline a window ahead: a client that stops reading is still cut
	// within one.
	rc := http.NewResponseController(w)
	extend := func() { _ = rc.SetWriteDeadline(time.Now().Add(exportWrite)) } // not every writer has one
	extend()
	bw := bufio.NewWriterSize(w, 64<<10)
	var cw *csv.Writer
	enc := json.NewEncoder(bw)
	started, n, seen := false, 0, 0
	start := func() {
		if started {
			return
		}
		started = true
		if format == "csv" {
			w.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
			w.Header().Set("Content-Disposition", "attachment; filename=\"broadcast-"+strconv.FormatUint(id, 10)+"-outcomes.csv\"")
			w.WriteHeader(http.StatusOK)
			cw = csv.NewWriter(bw)
			_ = cw.Write([]string{"user_id", "token_id", "outcome", "code"})
			return
		}
		w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
	}
	err = r.Domain.Export(c.Request().Context(), id, kind, func(l outcomes.Line) error {
		if seen++; seen%flushEvery == 0 {
			extend()
		}
		if (code != "" && l.Code != code) || (user != 0 && l.UserID != user) {
			return nil
		}
		start()
		if cw != nil {
			if err := cw.Write([]string{strconv.FormatUint(l.UserID, 10), strconv.FormatUint(l.TokenID, 10), l.Outcome, l.Code}); err != nil {
				return err
			}
		} else if err := enc.Encode(l); err != nil {
			return err
		}
		if n++; n%flushEvery == 0 {
			if cw != nil {
				cw.Flush()
			}
			if err := bw.Flush(); err != nil {
				return err
			}
			w.Flush()
		}
		return nil
	})
	switch {
	case errors.Is(err, outcomes.ErrNotFound):
		return apierror.NotFound("not_found", "no broadcast with id %d", id)
	case errors.Is(err, outcomes.ErrNamed):
		return &apierror.Error{Status: http.StatusConflict, Code: "named_audience", Message: "this broadcast went to a named SQL audience whose query does not say its cursor is a token id: its outcomes cannot be listed by token or user. " +
			"If the cursor is the app's token id, return it also as token_id (SELECT t.id AS `cursor`, t.id AS token_id, ...): the audience's later broadcasts are then listed (docs/outcomes.md)"}
	case err != nil && !started:
		return err
	case err != nil:
		// The answer has begun: the status is sent. The stream ends
		// short; a client counting lines against targeted sees it.
		return nil
	}
	start()
	if cw != nil {
		cw.Flush()
	}
	return bw.Flush()
}

func unavailable() error {
	return &apierror.Error{Status: http.StatusServiceUnavailable, Code: "deliveries_unavailable", Message: "this instance does not read kept outcomes"}
}
