package rules

import (
	"time"

	"pushfan/model"
)

// Request is a validated broadcast submission: Rules.Validate and
// Rules.JobRequest make it (a resend makes one from its original), and
// broadcast.Service.Submit stores it (broadcast.Request is this type).
type Request struct {
	// App is the app the broadcast sends for (Validate resolved it).
	App                string
	Message            model.Message
	Audience           model.Audience
	DryRun             bool
	InvalidateOnDryRun bool
	RequestID          string
	CreatedBy          string
	// IdempotencyKey, with RequestHash (a digest of the request), makes a
	// repeated submit return the first broadcast instead of sending again.
	IdempotencyKey string
	RequestHash    string
	// SendAt schedules the broadcast (status scheduled until then).
	SendAt *time.Time
	// Trigger is api, schedule, cron or resend; JobName and FireTime name a
	// cron fire.
	Trigger  string
	JobName  string
	FireTime *time.Time
	// Class and pacing (see model.Broadcast).
	Class       string
	MaxRate     float64
	DeliverOver time.Duration
	// Hold stores the broadcast held until Release; ParentID names the
	// broadcast a resend goes over.
	Hold     bool
	ParentID uint64
	// FrequencyCap is the caps it is sent under ("": none), recorded on
	// the broadcast.
	FrequencyCap string
}
