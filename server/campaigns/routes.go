// Package campaigns is the API's read-only routes of the campaign
// analytics (docs/analytics.md#campaigns): GET /push/campaigns, the
// broadcasts grouped by category, cron job or analytics label per day or
// week, and GET /push/campaigns/breakdown, split by platform, app, locale
// or A/B variant (what a split does not store, the answer names). Both
// answer JSON, or CSV with format=csv.
//
// HTTP only, like package server, which registers the routes in its /push
// group behind its auth (a viewer reads) and passes in the domain (package
// campaigns' Reader) and its app filter. Every bad parameter is an
// *apierror.Error naming it.
package campaigns

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/campaigns"
	"pushfan/server/apierror"
)

// Domain reads the campaigns: campaigns.Reader.
type Domain interface {
	Trends(ctx context.Context, q campaigns.Query) ([]campaigns.Row, error)
	Breakdown(ctx context.Context, q campaigns.Query, dim campaigns.Dimension) (campaigns.Breakdown, error)
}

// Routes serve the campaigns.
type Routes struct {
	Domain Domain
	// Apps is the caller's apps (nil: every app), or the 4xx of a bad
	// ?app: the server's app filter, as GET /push/stats applies it.
	Apps func(echo.Context) ([]string, error)
	// Now is the clock the default range ends at.
	Now func() time.Time
}

// DefaultDays is the default range: the last 30 days, today included.
const DefaultDays = 30

// Register serves the routes in g (the /push group).
func (r *Routes) Register(g *echo.Group) {
	g.GET("/campaigns", r.trends)
	g.GET("/campaigns/breakdown", r.breakdown)
}

// Trends is GET /push/campaigns's answer.
type Trends struct {
	Group    campaigns.Group    `json:"group"`
	Interval campaigns.Interval `json:"interval"`
	TZ       string             `json:"tz"`
	From     string             `json:"from"`
	To       string             `json:"to"`
	Rows     []campaigns.Row    `json:"rows"`
}

// Breakdown is GET /push/campaigns/breakdown's answer.
type Breakdown struct {
	campaigns.Breakdown
	Group *campaigns.Group `json:"group"`
	Key   *string          `json:"key"`
	TZ    string           `json:"tz"`
	From  string           `json:"from"`
	To    string           `json:"to"`
}

func (r *Routes) trends(c echo.Context) error {
	q, from, to, err := r.query(c)
	if err != nil {
		return err
	}
	q.Interval = campaigns.Day
	if v := c.QueryParam("interval"); v != "" {
		if !slices.Contains(campaigns.Intervals, campaigns.Interval(v)) {
			return apierror.BadRequest("invalid_value", "interval", "interval must be day or week, got %q", v)
		}
		q.Interval = campaigns.Interval(v)
	}
	if c.QueryParam("key") != "" {
		return apierror.BadRequest("invalid_value", "key", "key filters a breakdown only")
	}
	csv, err := wantCSV(c)
	if err != nil {
		return err
	}
	if r.Domain == nil {
		return unavailable()
	}
	rows, err := r.Domain.Trends(c.Request().Context(), q)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []campaigns.Row{}
	}
	if csv {
		return writeCSV(c, "campaigns-"+string(q.Group)+"-"+from+"-"+to+".csv", trendsCSV(rows, q.Loc))
	}
	return c.JSON(http.StatusOK, Trends{Group: q.Group, Interval: q.Interval, TZ: q.Loc.String(), From: from, To: to, Rows: rows})
}

func (r *Routes) breakdown(c echo.Context) error {
	q, from, to, err := r.query(c)
	if err != nil {
		return err
	}
	by := campaigns.Dimension(c.QueryParam("by"))
	if !slices.Contains(campaigns.Dimensions, by) {
		return apierror.BadRequest("invalid_value", "by", "by must be platform, app, locale or variant, got %q", by)
	}
	if c.QueryParam("interval") != "" {
		return apierror.BadRequest("invalid_value", "interval", "a breakdown spans the whole range: it takes no interval")
	}
	ans := Breakdown{TZ: q.Loc.String(), From: from, To: to}
	if k, ok := c.QueryParams()["key"]; ok {
		if c.QueryParam("group") == "" {
			return apierror.BadRequest("missing_value", "group", "key needs group: the group (category, job or label) whose value it is")
		}
		if len(k[0]) > 255 {
			return apierror.BadRequest("invalid_value", "key", "key is at most 255 characters")
		}
		q.Key = &k[0]
		ans.Group, ans.Key = &q.Group, q.Key
	}
	csv, err := wantCSV(c)
	if err != nil {
		return err
	}
	if r.Domain == nil {
		return unavailable()
	}
	b, err := r.Domain.Breakdown(c.Request().Context(), q, by)
	if err != nil {
		return err
	}
	if csv {
		return writeCSV(c, "campaigns-"+string(by)+"-"+from+"-"+to+".csv", breakdownCSV(b))
	}
	ans.Breakdown = b
	return c.JSON(http.StatusOK, ans)
}

// query reads the parameters both routes share: group, tz, from, to and
// the caller's apps; from and to as given (or defaulted).
func (r *Routes) query(c echo.Context) (q campaigns.Query, from, to string, err error) {
	q.Group = campaigns.ByCategory
	if v := c.QueryParam("group"); v != "" {
		if !slices.Contains(campaigns.Groups, campaigns.Group(v)) {
			return q, "", "", apierror.BadRequest("invalid_value", "group", "group must be category, job or label, got %q", v)
		}
		q.Group = campaigns.Group(v)
	}
	q.Loc = time.UTC
	if v := c.QueryParam("tz"); v != "" {
		// An IANA name only: time.LoadLocation also takes "Local" and
		// "", which mean the server's zone, not the viewer's.
		loc, lerr := time.LoadLocation(v)
		if lerr != nil || v == "Local" {
			return q, "", "", apierror.BadRequest("invalid_value", "tz", "tz must be an IANA time zone such as Asia/Seoul or UTC, got %q", v)
		}
		q.Loc = loc
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	to = c.QueryParam("to")
	if to == "" {
		to = now().In(q.Loc).Format(time.DateOnly)
	}
	from = c.QueryParam("from")
	if from == "" {
		if t, perr := time.ParseInLocation(time.DateOnly, to, q.Loc); perr == nil {
			from = t.AddDate(0, 0, 1-DefaultDays).Format(time.DateOnly)
		} else {
			from = to // to's own error follows
		}
	}
	if q.From, q.To, err = campaigns.Days(from, to, q.Loc); err != nil {
		var pe *campaigns.ParamError
		if errors.As(err, &pe) {
			return q, "", "", apierror.BadRequest(pe.Code, pe.Field, "%s", pe.Msg)
		}
		return q, "", "", err
	}
	if r.Apps != nil {
		if q.Apps, err = r.Apps(c); err != nil {
			return q, "", "", err
		}
	}
	return q, from, to, nil
}

func wantCSV(c echo.Context) (bool, error) {
	switch f := c.QueryParam("format"); f {
	case "", "json":
		return false, nil
	case "csv":
		return true, nil
	default:
		return false, apierror.BadRequest("invalid_value", "format", "format must be json or csv, got %q", f)
	}
}

func unavailable() error {
	return &apierror.Error{Status: http.StatusServiceUnavailable, Code: "campaigns_unavailable", Message: "this instance does not read campaigns"}
}
