package rules

import (
	"pushfan/model"
)

// Request is a validated broadcast submission: Rules.Validate and
// Rules.JobRequest make it (a resend makes one from its original), and
// broadcast.Service.Submit stores it (broadcast.Request is this type).
type Request struct {
	// Submission is what the broadcast is stored with, as it is.
	model.Submission
	// Hold stores the broadcast held until Release.
	Hold bool
}
