package audit

import "strings"

// The actions, named noun.verb or a single word.
const (
	BroadcastCreate  = "broadcast.create"
	BroadcastCancel  = "broadcast.cancel"
	BroadcastRelease = "broadcast.release"
	// BroadcastReleaseRefused: a release the four-eyes rule refused (the
	// one refusal recorded: who tried to release their own broadcast).
	BroadcastReleaseRefused = "broadcast.release.refused"
	BroadcastResend         = "broadcast.resend"
	BroadcastEdit           = "broadcast.edit"
	TestSend                = "testsend"
	SegmentCreate           = "segment.create"
	SegmentUpdate           = "segment.update"
	SegmentDelete           = "segment.delete"
	ConsentUpdate           = "consent.update"
	AudiencesReload         = "audiences.reload"
	WebhookRedeliver        = "webhook.redeliver"
	WebhookEnable           = "webhook.enable"
	JobFire                 = "job.fire"
	JobRun                  = "job.run"
	JobPause                = "job.pause"
	JobResume               = "job.resume"
	KeyCreate               = "key.create"
	KeyRevoke               = "key.revoke"
	TemplateCreate          = "template.create"
	TemplateUpdate          = "template.update"
	TemplateDelete          = "template.delete"
	SignIn                  = "signin"
	SignInFailed            = "signin.failed"
	SignOut                 = "signout"
)

// When says who writes a route's entry, and in which transaction.
type When uint8

const (
	// InChange: the domain code that stores the change, in the change's
	// own transaction (Write).
	InChange When = iota + 1
	// AfterAnswer: the server, once the route has answered with success,
	// in a transaction of its own: the route changes no table (a test
	// send goes to FCM, a reload swaps what is in memory).
	AfterAnswer
	// ByHandler: the route's handler itself (a sign-in records signin
	// and signin.failed, a refused one too).
	ByHandler
	// NotAChange: nothing is recorded. A POST that only counts (a
	// preview), or what an app's devices report (engagement events), is
	// no one's change.
	NotAChange
)

// Rule is how one mutating route is audited.
type Rule struct {
	Method, Path string // the route as Echo names it: "POST", "/push/broadcasts/:id/cancel"
	Action       string
	When         When
	// Target is the entry's target made of the route's path parameters:
	// "broadcast:{id}"; "" when the change names it (a new broadcast's
	// id is known inside its transaction: Created).
	Target string
	// Detail lists path parameters copied into the entry's detail.
	Detail []string
}

// rules is the table of every mutating route: one line a route. A route
// missing here fails the completeness test (server/audit_test.go), which
// walks the OpenAPI document's every POST, PUT, PATCH and DELETE.
func rules() []Rule {
	return []Rule{
		{"POST", "/push/broadcast", BroadcastCreate, InChange, "", nil},
		{"POST", "/push/broadcasts/:id/cancel", BroadcastCancel, InChange, "broadcast:{id}", nil},
		{"POST", "/push/broadcasts/:id/release", BroadcastRelease, InChange, "broadcast:{id}", nil},
		{"POST", "/push/broadcasts/:id/resend", BroadcastResend, InChange, "broadcast:{id}", nil},
		{"POST", "/push/test", TestSend, AfterAnswer, "", nil},
		{"POST", "/push/broadcasts/:id/test", TestSend, AfterAnswer, "broadcast:{id}", nil},
		{"POST", "/push/segments", SegmentCreate, InChange, "", nil},
		{"PUT", "/push/segments/:name", SegmentUpdate, InChange, "segment:{name}", nil},
		{"DELETE", "/push/segments/:name", SegmentDelete, InChange, "segment:{name}", nil},
		{"PUT", "/push/users/:id/consents/:category", ConsentUpdate, InChange, "user:{id}", []string{"category"}},
		{"POST", "/push/audiences/reload", AudiencesReload, AfterAnswer, "", nil},
		{"POST", "/push/webhooks/:name/deliveries/:id/redeliver", WebhookRedeliver, InChange, "webhook:{name}", []string{"id"}},
		{"POST", "/push/webhooks/:name/enable", WebhookEnable, InChange, "webhook:{name}", nil},
		{"POST", "/internal/cron/:job", JobFire, InChange, "job:{job}", nil},
		{"POST", "/push/cron/:job/run", JobRun, InChange, "job:{job}", nil},
		{"POST", "/push/cron/:job/pause", JobPause, InChange, "job:{job}", nil},
		{"POST", "/push/cron/:job/resume", JobResume, InChange, "job:{job}", nil},
		{"PATCH", "/push/broadcasts/:id", BroadcastEdit, InChange, "broadcast:{id}", nil},
		{"POST", "/push/keys", KeyCreate, InChange, "", nil},
		{"DELETE", "/push/keys/:id", KeyRevoke, InChange, "key:{id}", nil},
		{"POST", "/push/templates", TemplateCreate, InChange, "", nil},
		{"PUT", "/push/templates/:name", TemplateUpdate, InChange, "template:{name}", nil},
		{"DELETE", "/push/templates/:name", TemplateDelete, InChange, "template:{name}", nil},
		{"POST", "/console/api/session", SignIn, ByHandler, "", nil},
		{"DELETE", "/console/api/session", SignOut, AfterAnswer, "", nil},
		{"POST", "/push/preview", "", NotAChange, "", nil},
		{"POST", "/push/audiences/:name/preview", "", NotAChange, "", nil},
		{"POST", "/push/segments/preview", "", NotAChange, "", nil},
		{"POST", "/v1/events", "", NotAChange, "", nil},
	}
}

// Rules returns the table (a copy: callers may not change it).
func Rules() []Rule { return rules() }

// RuleFor is the rule of the route method path (Echo's path, with
// ":param"); ok is false for a route not in the table.
func RuleFor(method, path string) (r Rule, ok bool) {
	for _, r := range rules() {
		if r.Method == method && r.Path == path {
			return r, true
		}
	}
	return Rule{}, false
}

// TargetOf fills r.Target's "{param}"s from param (a route's path
// parameters).
func (r Rule) TargetOf(param func(string) string) string {
	var b strings.Builder
	rest := r.Target
	for {
		i := strings.IndexByte(rest, '{')
		j := strings.IndexByte(rest, '}')
		if i < 0 || j < i {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:i])
		b.WriteString(param(rest[i+1 : j]))
		rest = rest[j+1:]
	}
}
