// Package apiclient holds pushfan's API objects as a client decodes them,
// shared by the tests, the bench and the load drivers so that they all read
// the API the same way (and independently of the server's own types).
package apiclient

import "time"

// Broadcast is the API's broadcast object.
type Broadcast struct {
	ID     uint64 `json:"id"`
	Status string `json:"status"`
	DryRun bool   `json:"dry_run"`
	// Targeted is 0 while the API shows null (its audience is not counted
	// yet: Planning, scheduled, or held before its count); a test that
	// tells the two apart reads the JSON itself.
	Targeted int64 `json:"targeted"`
	// UsersTargeted is the users holding the targeted tokens, nil while
	// the API shows null (not counted yet).
	UsersTargeted     *int64           `json:"users_targeted"`
	Planning          bool             `json:"planning"`
	Succeeded         int64            `json:"succeeded"`
	Failed            int64            `json:"failed"`
	Canceled          int64            `json:"canceled"`
	Capped            int64            `json:"capped"`
	FrequencyCap      *string          `json:"frequency_cap"`
	Errors            map[string]int64 `json:"errors"`
	InvalidatedTokens int64            `json:"invalidated_tokens"`
	WriteBackFailures int64            `json:"writeback_failures"`
	Error             *string          `json:"error"`
	CreatedAt         time.Time        `json:"created_at"`
	PlannedAt         *time.Time       `json:"planned_at"`
	StartedAt         *time.Time       `json:"started_at"`
	FinishedAt        *time.Time       `json:"finished_at"`
	DurationMS        *int64           `json:"duration_ms"`
	Chunks            *Chunks          `json:"chunks"`
	Class             string           `json:"class"`
	MaxRate           *float64         `json:"max_rate"`
	DeliverOver       *string          `json:"deliver_over"`
	ExpectedFinishAt  *time.Time       `json:"expected_finish_at"`
	// Variants: targets sent per language of a localized broadcast.
	Variants map[string]int64 `json:"variants"`
	// Holding and resending.
	Trigger       string     `json:"trigger"`
	App           string     `json:"app"`
	CreatedBy     string     `json:"created_by"`
	ParentID      uint64     `json:"parent_id"`
	HoldExpiresAt *time.Time `json:"hold_expires_at"`
	ReleasedBy    string     `json:"released_by"`
	CanceledBy    string     `json:"canceled_by"`
	ReleasedAt    *time.Time `json:"released_at"`
	// Consent (docs/consent.md): the category, its rules as the
	// broadcast ran under them, and the targets left out or deferred.
	Category          *string   `json:"category"`
	AnalyticsLabel    *string   `json:"analytics_label"`
	Consent           *Category `json:"consent"`
	ExcludedNoConsent int64     `json:"excluded_no_consent"`
	NightDeferred     int64     `json:"night_deferred"`
	// Local-time delivery (server/view/local.go).
	LocalTime
}

// Category is a message category's rules as a broadcast ran under them.
type Category struct {
	Name    string `json:"name"`
	Consent string `json:"consent"`
	Night   *struct {
		Window  QuietHours `json:"window"`
		Consent string     `json:"consent"`
	} `json:"night"`
	TitlePrefix string `json:"title_prefix"`
	BodySuffix  string `json:"body_suffix"`
}

// Chunks is how a finished broadcast's work was shared.
type Chunks struct {
	Chunks    int            `json:"chunks"`
	Claims    int            `json:"claims"`
	Takeovers int            `json:"takeovers"`
	DoneBy    map[string]int `json:"done_by"`
}

// Planned reports whether the broadcast's audience is planned: from then
// on Targeted is the whole audience.
func (b Broadcast) Planned() bool { return b.PlannedAt != nil }

// Final reports whether the broadcast has ended.
func (b Broadcast) Final() bool {
	return b.Status == "completed" || b.Status == "canceled" || b.Status == "failed"
}
