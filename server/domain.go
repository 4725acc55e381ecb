package server

import (
	"context"
	"slices"
	"time"

	"pushfan/audience"
	"pushfan/broadcast"
	"pushfan/broadcast/reads"
	"pushfan/broadcast/rules"
	"pushfan/broadcast/testsend"
	"pushfan/cron"
	"pushfan/model"
	"pushfan/server/campaigns"
	"pushfan/server/consents"
	"pushfan/server/deliveries"
	"pushfan/server/segments"
	"pushfan/server/templates"
)

// The API calls the domain through the interfaces below, each the
// methods of the domain it uses with their signatures as the domain
// declares them (package app passes the broadcast service's parts). The
// API's contract can then be tested against fakes, without a database
// (contract_test.go), while the end-to-end tests run the real stack.

// Submitter creates broadcasts and changes stored ones (and, if a schedule.Domain and jobs.Control, edits and controls jobs).
type Submitter interface {
	// Validate applies the request rules: a *rules.FieldError names
	// the field at fault.
	Validate(spec rules.Spec) (broadcast.Request, error)
	Submit(ctx context.Context, req broadcast.Request) (b *model.Broadcast, existing bool, err error)
	Cancel(ctx context.Context, id uint64, by string) (*model.Broadcast, error)
	Release(ctx context.Context, id uint64, by model.Actor) (*model.Broadcast, error)
	Resend(ctx context.Context, rr broadcast.ResendRequest) (*model.Broadcast, bool, error)
	FireJob(ctx context.Context, j *cron.Compiled, at time.Time) (*model.Broadcast, bool, error)
}

// Reader reads broadcasts, their counts and engagement, and previews
// audiences; it sends nothing.
type Reader interface {
	// Get reads the row; Peek may serve one read a moment ago (the read
	// cache), which the caller must not modify.
	Get(ctx context.Context, id uint64) (*model.Broadcast, error)
	Peek(ctx context.Context, id uint64) (*model.Broadcast, error)
	List(ctx context.Context, f model.ListFilter) ([]*model.Broadcast, error)
	Stats(ctx context.Context, apps []string) (model.Stats, error)
	Failures(ctx context.Context, id uint64, f model.FailureFilter, after uint64, limit int) ([]model.Failure, error)
	// Wait blocks until the broadcast is final (true), ctx ends, or the
	// domain stops.
	Wait(ctx context.Context, id uint64) (bool, error)
	ExpectedFinish(b *model.Broadcast) *time.Time
	Preview(ctx context.Context, b audience.Bound, q reads.PreviewCap, n int) (reads.Preview, error)
	PreviewAudience(ctx context.Context, spec *rules.AudienceSpec, q reads.PreviewCap, n int) (reads.Preview, error)
	Engagement(ctx context.Context, b *model.Broadcast) (model.Engagement, []string, error)
	EngagementSeries(ctx context.Context, id uint64, bucket time.Duration) ([]model.SeriesPoint, error)
	EngagementTotals(ctx context.Context, ids []uint64) (map[uint64]model.EventCounts, error)
	ClickLink(ctx context.Context, id uint64, variant int, data bool) (string, error)
	SendRate(ctx context.Context, id uint64, since time.Time) ([]model.SeriesPoint, time.Duration, error)
	LastJobFire(ctx context.Context, job string) (model.LastFire, error)
}

// Tester sends a message now to a few named users or tokens.
type Tester interface {
	TestSend(ctx context.Context, spec testsend.TestSpec, by string) (*testsend.TestReport, error)
	TestSendBroadcast(ctx context.Context, id uint64, to testsend.TestRecipients, by string) (*testsend.TestReport, error)
}

// Domain is what the API serves: the domain's operations, and the facts
// of the configuration it shows (apps, named audiences, jobs).
type Domain struct {
	Submitter Submitter
	Reader    Reader
	Tester    Tester
	Consents  Consents
	// Segments are the saved segments (segment.Catalog).
	Segments Segments
	// Keys are the API keys kept in the database (apikey.Keys); nil:
	// none (only the environment's tokens let anyone in).
	Keys       Keys
	Deliveries deliveries.Domain // a user's deliveries (outcomes.Reader); nil: 503
	Campaigns  campaigns.Domain  // the campaign analytics (campaigns.Reader); nil: 503
	Apps       Apps
	// Audiences holds the named audiences, compiled (and checked against
	// the database) by the domain: read at each request, so a reload shows
	// at once. ReloadAudiences reloads them (nil: the route answers 503);
	// its *audience.ReloadError lists the problems of a failed one.
	Audiences       *audience.Catalog
	ReloadAudiences func(context.Context) (*audience.Set, error)
	Jobs            []*cron.Compiled // the recurring jobs (GET /push/cron, POST /internal/cron/{job})
	Templates       templates.Routes // the message templates (the wiring sets its store and public URL)
	// Categories are the message categories (GET /push/categories).
	Categories Categories
	// AuditLog reads the audit trail (nil: its routes answer 503).
	AuditLog AuditLog
}

// Consents records and reads the bundled consent table (consent.Book),
// for the routes of package server/consents; Categories are the message
// categories as they show them.
type (
	Consents   = consents.Domain
	Categories = consents.Categories
)

// Segments saves, reads and counts the saved segments (segment.Catalog),
// for the routes of package server/segments.
type Segments = segments.Domain

// App is one app (Firebase project) as GET /push/apps shows it.
type App struct {
	Name      string
	ProjectID string
	RateLimit float64 // its messages a second
}

// Apps are the apps the deployment sends for (docs/apps.md).
type Apps struct {
	// List is every app, in configuration order (never empty).
	List []App
	// Default is the app a request, an audience or a job that names none
	// belongs to: the only app; "" when there are several (the request
	// rules then refuse a request naming none).
	Default string
}

// of is the app a request, an audience or a job that names app belongs to.
func (a Apps) of(app string) string {
	if app != "" {
		return app
	}
	return a.Default
}

// known reports whether app is configured.
func (a Apps) known(app string) bool {
	return slices.ContainsFunc(a.List, func(x App) bool { return x.Name == app })
}

// audience is the named audience called name, in the current set.
func (d *Domain) audience(name string) (*audience.Entry, bool) {
	return d.Audiences.Load().Get(name)
}
