// Package view holds the objects of the API contract as they are encoded:
// the broadcast object and its engagement funnel, the stats and failure
// pages. They are plain model-to-JSON renderings, shared by the server's
// handlers and its live-watch streams.
package view

import (
	"time"

	"pushfan/model"
)

// Broadcast is the broadcast object of the API contract.
type Broadcast struct {
	ID     uint64       `json:"id"`
	Status model.Status `json:"status"`
	DryRun bool         `json:"dry_run"`
	// Targeted is null until the audience is counted (TargetedKnown):
	// while Planning, before a scheduled broadcast's time, and before a
	// held one's preview count; never a part of the audience, never 0 for
	// one not counted yet.
	Targeted *int64 `json:"targeted"`
	// UsersTargeted is how many users hold the targeted devices, each
	// once: null until the plan is complete and they are counted (beside
	// it, in the background), and for a broadcast planned before the
	// count existed or whose count failed.
	UsersTargeted *int64 `json:"users_targeted"`
	// UsersCountError is why the count of users failed for good (never
	// run again: users_targeted stays null); null while none did.
	UsersCountError *string `json:"users_count_error"`
	// Planning: the audience's plan runs (chunks are made and the
	// audience counted, whatever the pace); targeted is null until it ends.
	Planning  bool  `json:"planning"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Canceled  int64 `json:"canceled"`
	// Capped are targets withheld by a frequency cap: succeeded + failed
	// + canceled + capped = targeted.
	Capped            int64            `json:"capped"`
	Errors            map[string]int64 `json:"errors"`
	InvalidatedTokens int64            `json:"invalidated_tokens"`
	WriteBackFailures int64            `json:"writeback_failures"` // on_dead kept failing (see the OpenAPI document)
	// FrequencyCap is the caps it was sent under, "1/2h,3/day"; null for
	// none (exempt, bypassed, or none configured).
	FrequencyCap *string        `json:"frequency_cap"`
	Error        *string        `json:"error"`
	Message      model.Message  `json:"message"`
	Audience     model.Audience `json:"audience"`
	RequestID    string         `json:"request_id,omitempty"`
	CreatedBy    string         `json:"created_by,omitempty"`
	Trigger      string         `json:"trigger"`
	// App is the app (Firebase project) it sends for (docs/apps.md).
	App       string     `json:"app"`
	SendAt    *time.Time `json:"send_at,omitempty"`
	JobName   string     `json:"job_name,omitempty"`
	FireTime  *time.Time `json:"fire_time,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	// PlannedAt is when the audience's plan was complete (null while it
	// is planned: targeted is then the targets planned so far).
	PlannedAt  *time.Time `json:"planned_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	DurationMS *int64     `json:"duration_ms"`
	// Class is the scheduling class; MaxRate and DeliverOver the pace.
	Class       string   `json:"class"`
	MaxRate     *float64 `json:"max_rate"`
	DeliverOver *string  `json:"deliver_over"`
	// ExpectedFinishAt is while it runs: when it should end at its pace,
	// or at the rate it has kept.
	ExpectedFinishAt *time.Time `json:"expected_finish_at,omitempty"`
	// Chunks is how the work was shared (chunks, claims, takeovers, chunks
	// done per instance), kept when the broadcast finishes.
	Chunks *model.ChunkSummary `json:"chunks,omitempty"`
	// Variants counts a localized broadcast's targets sent per language
	// ("default": the top-level title and body); absent otherwise.
	Variants map[string]int64 `json:"variants,omitzero"`
	// Engagement is what the apps reported (GET of one broadcast only).
	Engagement *Engagement `json:"engagement,omitempty"`
	// Holding (see server/held.go) and resending: the original of a resend.
	HoldExpiresAt *time.Time `json:"hold_expires_at,omitempty"`
	ReleasedBy    string     `json:"released_by,omitempty"`
	ReleasedAt    *time.Time `json:"released_at,omitempty"`
	CanceledBy    string     `json:"canceled_by,omitempty"`
	ParentID      uint64     `json:"parent_id,omitempty"`

	// StartsAt is when a scheduled broadcast or cron fire starts: send_at
	// or fire_time plus its start spread offset (PUSHFAN_START_SPREAD).
	StartsAt *time.Time `json:"starts_at,omitempty"`

	// Category is the message category it was sent in, and Consent the
	// category's rules as it ran under them (null when no categories were
	// configured): its proof (docs/consent.md). ExcludedNoConsent counts
	// the targets its plan left out for want of consent, NightDeferred
	// those moved to the end of the category's night window.
	Category *string `json:"category"`
	// AnalyticsLabel is fcm_options.analytics_label of its messages:
	// Firebase's key to its delivery data (docs/analytics.md).
	AnalyticsLabel    *string         `json:"analytics_label"`
	Consent           *model.Category `json:"consent"`
	ExcludedNoConsent int64           `json:"excluded_no_consent"`
	NightDeferred     int64           `json:"night_deferred"`

	// Local-time delivery (see local.go).
	local
}

// Of is b's broadcast object at now (a running one's duration runs to now),
// without the live estimates only the server knows.
func Of(b *model.Broadcast, now time.Time) Broadcast {
	v := Broadcast{
		ID: b.ID, Status: b.Status, DryRun: b.DryRun,
		Planning: !b.Status.Final() && (b.Planning || b.Status == model.StatusPlanning), Succeeded: b.Succeeded, Failed: b.Failed, Canceled: b.Canceled, Capped: b.Capped,
		Errors: b.Errors, InvalidatedTokens: b.Invalidated, WriteBackFailures: b.WriteBackFailures,
		Message: b.Message, Audience: b.Audience, RequestID: b.RequestID, CreatedBy: b.CreatedBy,
		Trigger: b.Trigger, App: b.App, SendAt: b.SendAt, JobName: b.JobName, FireTime: b.FireTime, StartsAt: b.StartsAt,
		CreatedAt: b.CreatedAt, PlannedAt: b.PlannedAt, StartedAt: b.StartedAt, FinishedAt: b.FinishedAt,
		Chunks: b.Chunks,
		Class:  b.Class,

		Variants:      b.Variants,
		HoldExpiresAt: b.HoldExpiresAt, ReleasedBy: b.ReleasedBy, ReleasedAt: b.ReleasedAt, CanceledBy: b.CanceledBy, ParentID: b.ParentID,
	}
	if b.TargetedKnown() {
		n := b.Targeted
		v.Targeted = &n
	}
	if u := b.UsersTargeted; u != nil {
		n := *u
		v.UsersTargeted = &n
	}
	if e := b.UsersCountError; e != "" && b.UsersTargeted == nil {
		v.UsersCountError = &e
	}
	v.Audience.Local = nil // rendered at the top level, as requested
	v.local = localOf(b)
	v.ExcludedNoConsent, v.NightDeferred = b.ExcludedNoConsent, b.NightDeferred
	if c := b.Category; c != nil {
		name, rules := c.Name, *c
		v.Category, v.Consent = &name, &rules
	}
	if l := b.Message.AnalyticsLabel(); l != "" {
		v.AnalyticsLabel = &l
	}
	if b.FrequencyCap != "" {
		c := b.FrequencyCap
		v.FrequencyCap = &c
	}
	if b.MaxRate > 0 {
		r := b.MaxRate
		v.MaxRate = &r
	}
	if b.DeliverOver > 0 {
		d := b.DeliverOver.String()
		v.DeliverOver = &d
	}
	if v.Errors == nil {
		v.Errors = map[string]int64{}
	}
	if b.Error != "" {
		msg := b.Error
		v.Error = &msg
	}
	if b.StartedAt != nil {
		end := now
		if b.FinishedAt != nil {
			end = *b.FinishedAt
		}
		ms := end.Sub(*b.StartedAt).Milliseconds()
		v.DurationMS = &ms
	}
	return v
}
