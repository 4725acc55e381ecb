package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/audit"
	"pushfan/fcm"
	"pushfan/internal/platform/logging"
	"pushfan/model"
	"pushfan/server/view"
)

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.db.Ping(ctx); err != nil {
		s.log.WarnContext(ctx, "readiness: database unreachable", "err", err)
		return &APIError{Status: http.StatusServiceUnavailable, Code: "database_unreachable", Message: "the database does not answer"}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// createBroadcast validates, stores and starts a broadcast, then waits for
// it up to the configured ceiling: 200 with the final aggregate, or 202 with
// the live state and a Location to poll.
func (s *Server) createBroadcast(c echo.Context) error {
	var req broadcastRequest
	if err := decodeStrict(c.Request().Body, &req); err != nil {
		return err
	}
	if err := s.mayUseApp(c, req.App); err != nil {
		return err
	}
	in, err := s.dom.Submitter.Validate(req.Spec)
	if err != nil {
		return err
	}
	wait, err := waitParam(c, req.Wait)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	in.RequestID = logging.RequestID(ctx)
	if t := caller(c); t != nil {
		in.CreatedBy, in.Creator = t.Name, t.Actor
	}
	if in.IdempotencyKey, err = idempotencyKey(c); err != nil {
		return err
	}
	b, existing, err := s.dom.Submitter.Submit(ctx, in)
	if err != nil {
		return err
	}
	return s.answerSubmitted(c, b, existing, wait)
}

// waitParam is whether to wait for a submitted broadcast: the query's wait
// over the body's, true when neither says.
func waitParam(c echo.Context, body *bool) (bool, error) {
	switch q := c.QueryParam("wait"); q {
	case "":
		return body == nil || *body, nil
	case "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, badRequest("invalid_value", "wait", "query parameter wait must be 0, 1, true or false")
	}
}

// idempotencyKey is the request's Idempotency-Key header ("" when none).
func idempotencyKey(c echo.Context) (string, error) {
	key := c.Request().Header.Get("Idempotency-Key")
	if key != "" && (len(key) > 255 || !validIdempotencyKey.MatchString(key)) {
		return "", badRequest("invalid_idempotency_key", "Idempotency-Key", "the Idempotency-Key header must be 1-255 printable ASCII characters")
	}
	return key, nil
}

// answerSubmitted answers a stored broadcast (a submit, a resend): with
// wait, it waits for it up to PUSHFAN_WAIT_TIMEOUT unless it is scheduled
// or held; 200 when it is final, else 202 with a Location to poll.
func (s *Server) answerSubmitted(c echo.Context, b *model.Broadcast, existing, wait bool) error {
	ctx := c.Request().Context()
	if existing {
		c.Response().Header().Set("Idempotent-Replayed", "true")
		audit.Created(ctx, "broadcast", strconv.FormatUint(b.ID, 10)) // the repeat's entry names it
	}
	if wait && !b.Status.Final() && b.Status != model.StatusScheduled && b.Status != model.StatusHeld {
		wctx, cancel := context.WithTimeout(ctx, s.cfg.Timeouts.Wait)
		_, err := s.dom.Reader.Wait(wctx, b.ID) // the row read below says whether it finished
		cancel()
		if err != nil {
			return err
		}
	}
	cur, err := s.dom.Reader.Get(context.WithoutCancel(ctx), b.ID)
	if err != nil {
		return err
	}
	if cur.Status.Final() {
		return c.JSON(http.StatusOK, s.view(cur))
	}
	c.Response().Header().Set(echo.HeaderLocation, "/push/broadcasts/"+strconv.FormatUint(b.ID, 10))
	return c.JSON(http.StatusAccepted, s.view(cur))
}

var validIdempotencyKey = regexp.MustCompile(`^[\x21-\x7e]+$`)

func parseID(c echo.Context) (uint64, error) {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || id == 0 {
		return 0, badRequest("invalid_id", "id", "broadcast id %q is not a positive integer", c.Param("id"))
	}
	return id, nil
}

func (s *Server) getBroadcast(c echo.Context) error {
	id, err := parseID(c)
	if err != nil {
		return err
	}
	b, err := s.dom.Reader.Peek(c.Request().Context(), id)
	if err != nil {
		return err
	}
	v := s.view(b)
	if v.Engagement, err = s.engagement(c.Request().Context(), b); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) cancelBroadcast(c echo.Context) error {
	id, err := parseID(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 10*time.Second)
	defer cancel()
	b, err := s.dom.Submitter.Cancel(ctx, id, callerName(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.view(b))
}

func (s *Server) stats(c echo.Context) error {
	apps, err := s.appFilter(c)
	if err != nil {
		return err
	}
	st, err := s.dom.Reader.Stats(c.Request().Context(), apps)
	if err != nil {
		return err
	}
	if st.Errors == nil {
		st.Errors = map[string]int64{}
	}
	return c.JSON(http.StatusOK, view.Stats{
		Broadcasts: st.Broadcasts, DryRuns: st.DryRuns, Targeted: st.Targeted, Succeeded: st.Succeeded,
		Failed: st.Failed, Canceled: st.Canceled, Capped: st.Capped, InvalidatedTokens: st.InvalidatedTokens, Errors: st.Errors,
		Opened: st.Opened, Clicked: st.Clicked,
	})
}

// listFailures pages failed tokens by keyset: ?cursor=&limit=&code=&user_id=.
func (s *Server) listFailures(c echo.Context) error {
	id, err := parseID(c)
	if err != nil {
		return err
	}
	limit := 100
	if q := c.QueryParam("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > 1000 {
			return badRequest("invalid_value", "limit", "limit must be an integer from 1 to 1000")
		}
		limit = n
	}
	var after uint64
	if q := c.QueryParam("cursor"); q != "" {
		if after, err = strconv.ParseUint(q, 10, 64); err != nil {
			return badRequest("invalid_cursor", "cursor", "cursor %q is not one this API returned", q)
		}
	}
	f := model.FailureFilter{Code: c.QueryParam("code")}
	if f.Code != "" && !fcm.IsKnownCode(f.Code) {
		return badRequest("unknown_code", "code", "code %q is not an error code pushfan reports; known codes: %v", f.Code, fcm.KnownCodes())
	}
	if q := c.QueryParam("user_id"); q != "" {
		if f.UserID, err = strconv.ParseUint(q, 10, 64); err != nil || f.UserID == 0 {
			return badRequest("invalid_value", "user_id", "user_id %q is not a user id (a positive integer)", q)
		}
	}
	fs, err := s.dom.Reader.Failures(c.Request().Context(), id, f, after, limit+1)
	if err != nil {
		return err
	}
	page := view.FailuresPage{Failures: make([]view.Failure, 0, min(len(fs), limit))}
	if len(fs) > limit {
		fs, page.NextCursor = fs[:limit], new(strconv.FormatUint(fs[limit-1].ID, 10))
	}
	for _, f := range fs {
		page.Failures = append(page.Failures, view.Failure{TokenID: f.TokenID, UserID: f.UserID, Code: f.Code, Message: f.Message, Attempts: f.Attempts, CreatedAt: f.CreatedAt})
	}
	return c.JSON(http.StatusOK, page)
}

// listBroadcasts pages broadcasts newest first:
// ?status=scheduled&trigger=cron&limit=50&cursor=<opaque>.
func (s *Server) listBroadcasts(c echo.Context) error {
	f := model.ListFilter{Limit: 50}
	var err error
	if f.Apps, err = s.appFilter(c); err != nil {
		return err
	}
	if q := c.QueryParam("status"); q != "" {
		if !model.Status(q).Valid() {
			return badRequest("invalid_value", "status", "status must be one of scheduled, held, planning, queued, running, completed, canceled, failed")
		}
		f.Status = model.Status(q)
	}
	if q := c.QueryParam("trigger"); q != "" {
		if q != "api" && q != "schedule" && q != "cron" && q != "resend" {
			return badRequest("invalid_value", "trigger", "trigger must be api, schedule, cron or resend")
		}
		f.Trigger = q
	}
	if q := c.QueryParam("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > 500 {
			return badRequest("invalid_value", "limit", "limit must be an integer from 1 to 500")
		}
		f.Limit = n
	}
	if q := c.QueryParam("cursor"); q != "" {
		n, err := strconv.ParseUint(q, 10, 64)
		if err != nil || n == 0 {
			return badRequest("invalid_cursor", "cursor", "cursor %q is not one this API returned", q)
		}
		f.Before = n
	}
	want := f.Limit
	f.Limit++
	bs, err := s.dom.Reader.List(c.Request().Context(), f)
	if err != nil {
		return err
	}
	page := struct {
		Broadcasts []view.Broadcast `json:"broadcasts"`
		NextCursor *string          `json:"next_cursor"`
	}{Broadcasts: make([]view.Broadcast, 0, min(len(bs), want))}
	for i, b := range bs {
		if i == want {
			next := strconv.FormatUint(bs[want-1].ID, 10)
			page.NextCursor = &next
			break
		}
		page.Broadcasts = append(page.Broadcasts, s.view(b))
	}
	// The list's engagement: the counts only, one query for the page.
	ids := make([]uint64, len(page.Broadcasts))
	for i, v := range page.Broadcasts {
		ids[i] = v.ID
	}
	totals, err := s.dom.Reader.EngagementTotals(c.Request().Context(), ids)
	if err != nil {
		return err
	}
	for i := range page.Broadcasts {
		v := &page.Broadcasts[i]
		t := totals[v.ID]
		v.Engagement = &view.Engagement{Counts: view.CountsOf(t)}
		if v.Succeeded > 0 {
			v.Engagement.OpenRate = float64(t.Opened) / float64(v.Succeeded)
		}
	}
	return c.JSON(http.StatusOK, page)
}
