// Package model holds pushfan's plain domain types: a broadcast and its
// content, audience, counters and status, a failure, the stats totals.
// The API, the domain services and the storage all name them; none of
// them carries behaviour beyond a status's own rules.
package model

import (
	"encoding/json"
	"time"
)

// Status is a broadcast's lifecycle state.
type Status string

// Broadcast states. planning → queued → running → one of the three final
// states (planning → running when its first chunks are sent while the rest
// is planned); a planning or queued broadcast may also go straight to a
// final state (canceled, failed). A scheduled one becomes planning when it
// is due; a held one when it is released (or scheduled, if its send_at is
// still ahead), or canceled.
const (
	StatusScheduled Status = "scheduled" // waiting for send_at
	StatusHeld      Status = "held"      // waiting for a release (POST .../release)
	StatusPlanning  Status = "planning"  // its audience is being planned into chunks; none sent yet
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusCanceled  Status = "canceled"
	StatusFailed    Status = "failed"
)

// Valid reports whether s is one of the known states.
func (s Status) Valid() bool {
	switch s {
	case StatusScheduled, StatusHeld, StatusPlanning, StatusQueued, StatusRunning, StatusCompleted, StatusCanceled, StatusFailed:
		return true
	}
	return false
}

// Final reports whether s is a state a broadcast never leaves.
func (s Status) Final() bool {
	return s == StatusCompleted || s == StatusCanceled || s == StatusFailed
}

// Message is the notification content, stored as JSON.
type Message struct {
	Title string            `json:"title,omitempty"`
	Body  string            `json:"body,omitempty"`
	Image string            `json:"image,omitempty"`
	Data  map[string]string `json:"data,omitempty"`
	// Localized holds per-language title and body, keyed by a language
	// tag ("ko", "pt-BR"); a target whose locale matches none gets Title
	// and Body (see broadcast.localeMatcher).
	Localized map[string]Localized `json:"localized,omitempty"`
	// FCM's platform overrides, in the REST API's JSON shape, as the
	// request rules normalized them (broadcast/overrides.go): what FCM
	// receives, before pushfan's delivery defaults (fanout.Delivery).
	Android    json.RawMessage `json:"android,omitempty"`
	APNS       json.RawMessage `json:"apns,omitempty"`
	Webpush    json.RawMessage `json:"webpush,omitempty"`
	FCMOptions json.RawMessage `json:"fcm_options,omitempty"`
	// Track false: the messages carry no event token (unset: they do,
	// when the deployment tracks).
	Track *bool `json:"track,omitempty"`
	// LinkKey names the data key that holds the message's link, which a
	// tracked message sends through the click redirect.
	LinkKey string `json:"link_data_key,omitempty"`
	// Variants are A/B variants: each user gets one of these messages
	// (and the fields above are empty).
	Variants []ABVariant `json:"variants,omitempty"`
}

// ABVariant is one A/B variant of a broadcast: a full message, named, with
// its share of the users (weight, relative to the others').
type ABVariant struct {
	Name   string `json:"name"`
	Weight int    `json:"weight"`
	Message
}

// AnalyticsLabel is the fcm_options.analytics_label the message is sent
// with (its first variant's, with variants), "" without one.
func (m Message) AnalyticsLabel() string {
	opts := m.FCMOptions
	if len(m.Variants) > 0 {
		opts = m.Variants[0].FCMOptions
	}
	var o struct {
		Label string `json:"analytics_label"`
	}
	if len(opts) == 0 || json.Unmarshal(opts, &o) != nil {
		return ""
	}
	return o.Label
}

// Untracked reports a message sent without event tokens ("track": false).
func (m Message) Untracked() bool { return m.Track != nil && !*m.Track }

// Localized is one language's title and body. It replaces both: an empty
// one stays empty rather than falling back to another language.
type Localized struct {
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
}

// VariantDefault names, in Counts.Variants, the targets of a localized
// message that got the top-level title and body. It is no language tag.
const VariantDefault = "default"

// Counts are a broadcast's outcome counters; Errors maps an error code to
// how many targets ended with it. Chunk checkpoints add to them.
type Counts struct {
	Targeted, Succeeded, Failed, Canceled, Invalidated int64
	// Capped counts targets withheld by a frequency cap: an outcome, so
	// that succeeded + failed + canceled + capped = targeted.
	Capped int64
	Errors map[string]int64
	// WriteBackFailures counts dead tokens whose write-back to a mapped
	// schema's table (tokens.on_dead) kept failing and was skipped.
	WriteBackFailures int64
	// Variants counts the targets sent (succeeded or failed) per language
	// of a localized message, VariantDefault included; nil otherwise.
	Variants map[string]int64
}

// Submission is what a submit asks of a broadcast, as the request rules
// checked it (rules.Request carries it to the write side) and as the
// broadcast keeps it (Broadcast embeds it): one shape, not a copy made
// field by field.
type Submission struct {
	// App is the app (Firebase project) the broadcast sends for: its
	// tokens, its credentials, its quota (docs/apps.md); DefaultApp for
	// every broadcast made before apps existed.
	App                string
	Message            Message
	Audience           Audience
	DryRun             bool
	InvalidateOnDryRun bool
	RequestID          string
	// CreatedBy is the creator's display name; Creator the actor (person,
	// key or token) the four-eyes rule compares. Creator is zero for a
	// cron fire and for broadcasts stored before actors were (migration
	// 00033): those name an environment token in CreatedBy (CreatorActor).
	CreatedBy string
	Creator   Actor
	// IdempotencyKey, with RequestHash (a digest of the request), makes a
	// repeated submit return the first broadcast instead of sending again.
	IdempotencyKey string
	RequestHash    string
	// Scheduling.
	SendAt   *time.Time // a one-off broadcast waits for it in status scheduled
	Trigger  string     // api, schedule, cron or resend
	JobName  string     // cron jobs only
	FireTime *time.Time // cron jobs only
	// Class is ClassTransactional (urgent: chunk slots, workers and rate
	// permits go to it first) or ClassBulk.
	Class string
	// Pacing: at most MaxRate messages a second (0: no cap), and/or spread
	// over DeliverOver from the start (0: as fast as the budget allows).
	MaxRate     float64
	DeliverOver time.Duration
	// ParentID is the broadcast a resend goes over (0: none).
	ParentID uint64
	// FrequencyCap is the caps the broadcast is sent under, "1/2h,3/day"
	// (package caps); "" for none: exempt (transactional), bypassed by the
	// request ("frequency_cap": false), or no cap configured.
	FrequencyCap string
	// Category is the message category the broadcast is sent in, with its
	// rules as they were when it was made (docs/consent.md); nil when no
	// categories are configured.
	Category *Category
}

// Broadcast is one request to notify an audience, and its running result.
type Broadcast struct {
	ID     uint64
	Status Status
	Submission
	Counts
	Error      string // "" when none
	CreatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time

	// Local-time delivery (LocalDelivery): targets deferred by quiet hours,
	// targets whose zone was unknown, and targets of chunks still waiting
	// for their time.
	Deferred, ZoneFallbacks, Waiting int64
	// Consent (Category): targets the plan left out because their user had
	// not consented to the category, and targets moved to the end of its
	// night window (inside it, without night consent).
	ExcludedNoConsent, NightDeferred int64

	// Planning is true while the audience is still being planned (Targeted
	// is what the plan has counted so far); PlannedAt is when the plan was
	// complete, from which Targeted is the whole audience.
	Planning  bool
	PlannedAt *time.Time
	// HeldCounted: a held broadcast's audience has been counted (in the
	// background after its submit): Targeted is that count.
	HeldCounted bool
	// UsersTargeted is how many users hold the Targeted tokens, each once
	// however many devices they have: counted once the plan is complete
	// (package plan, users.go), nil until then, for a broadcast planned
	// before the count existed, and when the count failed.
	UsersTargeted *int64
	// UsersCountError is why the count of UsersTargeted failed for good
	// (never counted again); "" while none did.
	UsersCountError string

	// Durable-run fields (see package lease).
	MaxTokenID      uint64 // audience snapshot: tokens above it were registered later
	CancelRequested bool
	// SubmitToken names the submit attempt, to find it again after a lost
	// commit answer.
	SubmitToken string
	// Chunks summarises the chunk rows, kept when the broadcast finished.
	Chunks *ChunkSummary

	// Scheduling.
	// StartsAt is when a scheduled broadcast or a cron fire really starts:
	// SendAt or FireTime plus the start spread (broadcast.StartOffset).
	StartsAt *time.Time

	// Holding: a held broadcast waits for a release until HoldExpiresAt;
	// ReleasedBy names who released it, Releaser is who (the actor).
	HoldExpiresAt *time.Time
	ReleasedBy    string
	Releaser      Actor
	ReleasedAt    *time.Time
	// CanceledBy names who canceled it (the first to ask); "" for one
	// nobody canceled, or that failed or expired.
	CanceledBy string
}

// TargetedKnown reports whether Targeted is the count of the broadcast's
// audience, rather than a part of it or nothing yet: not while its plan
// runs (Planning: the plan counts it, exactly, in one pass), not before a
// scheduled broadcast's time (its audience is read then), not before a
// held broadcast's preview count lands; always once it is final, where
// succeeded + failed + canceled + capped = targeted.
func (b *Broadcast) TargetedKnown() bool {
	switch {
	case b.Status.Final():
		return true
	case b.Planning, b.Status == StatusPlanning, b.Status == StatusScheduled:
		return false
	case b.Status == StatusHeld:
		return b.HeldCounted
	}
	return true
}

// Paced reports whether the broadcast keeps a pace of its own.
func (b *Broadcast) Paced() bool { return b.MaxRate > 0 || b.DeliverOver > 0 }

// DefaultApp is the app of the environment-only configuration, and of
// every token and broadcast stored before apps existed.
const DefaultApp = "default"

// Scheduling classes. They are not FCM's message priority (android.priority,
// apns-priority), which is about the device; a class is about pushfan's own
// queue.
const (
	ClassTransactional = "transactional"
	ClassBulk          = "bulk"
)

// Audience says who a broadcast is for: everyone, or the listed users. The
// zero value is the empty audience.
type Audience struct {
	All     bool     `json:"all,omitempty"`
	UserIDs []uint64 `json:"user_ids,omitempty"`
	// Name selects a named SQL audience from the configuration (package
	// audience pages it, not this file), with its bound Params as JSON.
	Name   string          `json:"name,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	// TokenCursor records, at submit, that the named audience's cursor is
	// the app's token id (its query returns token_id, package audience):
	// its kept outcomes are then read by token and user as the built-in
	// audiences' are (package outcomes). Rows stored before it lack it:
	// false.
	TokenCursor bool `json:"token_cursor,omitempty"`
	// ResendOf selects the still-valid tokens that failed in that
	// broadcast with one of Codes (a resend; package repository pages it
	// like the other built-in audiences).
	ResendOf uint64   `json:"resend_of,omitempty"`
	Codes    []string `json:"codes,omitempty"`
	// Segment is a saved segment as the broadcast was sent to it (package
	// segment): every valid token of an enabled user its filter matches,
	// planned and paged like "all".
	Segment *SegmentRef `json:"segment,omitempty"`
	// Local sends at the users' local time and keeps their quiet hours
	// (localtime.go); Zones is one chunk's zone group while it is paged.
	Local *LocalDelivery `json:"local,omitempty"`
	Zones *ZoneFilter    `json:"-"`
}

// SegmentRef is a saved segment as a broadcast is sent to it: its name,
// and the version and filter (JSON, package segment/filter) it had then,
// kept with the broadcast so that a later edit never changes what it was.
type SegmentRef struct {
	Name    string          `json:"name"`
	Version int             `json:"version"`
	Filter  json.RawMessage `json:"filter"`
}

// ChunkSummary is how a finished broadcast's work was shared between
// instances (package lease keeps it when it deletes the chunk rows).
type ChunkSummary struct {
	Chunks    int            `json:"chunks"`
	Claims    int            `json:"claims"`
	Takeovers int            `json:"takeovers"`
	DoneBy    map[string]int `json:"done_by"` // chunks per instance; "canceled" for closed ones
}

// Failure is one token whose send finally failed in a broadcast.
type Failure struct {
	ID          uint64    `db:"id"`
	BroadcastID uint64    `db:"broadcast_id"`
	TokenID     uint64    `db:"token_id"`
	UserID      uint64    `db:"user_id"`
	Code        string    `db:"code"`
	Message     string    `db:"message"`
	Attempts    int       `db:"attempts"`
	CreatedAt   time.Time `db:"created_at"`
}

// FailureFilter narrows a broadcast's failures: Code "" and UserID 0 mean
// any.
type FailureFilter struct {
	Code   string
	UserID uint64
}

// Stats are totals across broadcasts. Dry runs send nothing real, so they are
// left out of every total and only counted, in DryRuns.
type Stats struct {
	Broadcasts, DryRuns, Targeted, Succeeded, Failed, Canceled, InvalidatedTokens int64
	Capped                                                                        int64
	Errors                                                                        map[string]int64
	// Opened and Clicked are distinct targets the apps reported (package
	// engagement).
	Opened, Clicked int64
}

// ListFilter selects broadcasts for the list endpoint.
type ListFilter struct {
	// Apps keeps the broadcasts of these apps only (nil: any app).
	Apps    []string
	Status  Status // "" = any
	Trigger string // "" = any
	Before  uint64 // keyset: ids below it (0 = from the newest)
	Limit   int
}

// LastFire is a job's most recent fire: its time and broadcast (zero and
// nil when it never fired), or a skipped fire's time.
type LastFire struct {
	FireTime  time.Time
	Broadcast *Broadcast // nil for a skipped fire
}

// JobPause is a paused cron job: when, and by whom (table job_pauses).
type JobPause struct {
	At time.Time
	By string
}

// CreatorActor is the actor that created the broadcast: Creator, or for
// a broadcast stored before actors were, the environment token its
// CreatedBy names (every creator was one then, but the scheduler).
func (s Submission) CreatorActor() Actor {
	if s.Creator.Kind == "" && s.CreatedBy != "" && s.Trigger != "cron" {
		return Actor{Kind: ActorToken, ID: s.CreatedBy, Name: s.CreatedBy}
	}
	return s.Creator
}
