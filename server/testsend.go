package server

import (
	"context"
	"net/http"

	"pushfan/broadcast/testsend"
	"pushfan/server/view"

	"github.com/labstack/echo/v4"
)

// testSend handles POST /push/test: the message goes now to the named
// users' valid tokens or to raw tokens, and the answer is per token. The
// sends get PUSHFAN_WAIT_TIMEOUT in all (below the write timeout, so the
// answer can always be written).
func (s *Server) testSend(c echo.Context) error {
	var spec testsend.TestSpec
	if err := decodeStrict(c.Request().Body, &spec); err != nil {
		return err
	}
	if err := s.mayUseApp(c, spec.App); err != nil {
		return err
	}
	return s.answerTestSend(c, func(ctx context.Context, by string) (*testsend.TestReport, error) {
		return s.dom.Tester.TestSend(ctx, spec, by)
	})
}

// answerTestSend runs a test send as the calling token, within
// PUSHFAN_WAIT_TIMEOUT, and answers its per-token report.
func (s *Server) answerTestSend(c echo.Context, send func(ctx context.Context, by string) (*testsend.TestReport, error)) error {
	by := ""
	if t := caller(c); t != nil {
		by = t.Name
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.cfg.Timeouts.Wait)
	defer cancel()
	rep, err := send(ctx, by)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, testSendViewOf(rep))
}

// testSendBroadcast handles POST /push/broadcasts/{id}/test: the stored
// message of a broadcast (a held one, before its release) goes now to the
// named users or tokens, answered as POST /push/test is.
func (s *Server) testSendBroadcast(c echo.Context) error {
	id, err := parseID(c)
	if err != nil {
		return err
	}
	var to testsend.TestRecipients
	if err := decodeStrict(c.Request().Body, &to); err != nil {
		return err
	}
	return s.answerTestSend(c, func(ctx context.Context, by string) (*testsend.TestReport, error) {
		return s.dom.Tester.TestSendBroadcast(ctx, id, to, by)
	})
}

func testSendViewOf(rep *testsend.TestReport) view.TestSend {
	v := view.TestSend{Results: make([]view.TestResult, 0, len(rep.Results)), UsersWithoutTokens: make([]view.SkippedUser, 0, len(rep.UsersWithoutTokens))}
	for _, r := range rep.Results {
		rv := view.TestResult{Token: tokenPrefix(r.Token), TokenStatus: r.State, Outcome: "failed", Attempts: r.Attempts, Invalidated: r.Invalidated}
		if r.Platform != "" {
			rv.Platform = &r.Platform
		}
		if r.TokenID != 0 {
			rv.TokenID = &r.TokenID
		}
		if r.UserID != 0 {
			rv.UserID = &r.UserID
		}
		if r.Succeeded {
			rv.Outcome = "succeeded"
			v.Succeeded++
			if r.MessageID != "" {
				rv.MessageID = &r.MessageID
			}
		} else {
			v.Failed++
			rv.Code, rv.Message = &r.Code, &r.Message
		}
		v.Results = append(v.Results, rv)
	}
	for _, u := range rep.UsersWithoutTokens {
		su := view.SkippedUser{UserID: u.UserID, Reason: u.Reason}
		if !u.InvalidatedAt.IsZero() {
			su.InvalidatedAt, su.InvalidReason = &u.InvalidatedAt, &u.InvalidReason
		}
		v.UsersWithoutTokens = append(v.UsersWithoutTokens, su)
	}
	return v
}

// tokenPrefix shows enough of a token to tell a list of them apart (12
// characters of an FCM token's 150 or so) and never the whole of one,
// however short.
func tokenPrefix(token string) string {
	return token[:min(12, len(token)/2)] + "…"
}
