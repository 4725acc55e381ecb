package rules

import "errors"

// EditSpec is an edit of a broadcast that has not started
// (PATCH /push/broadcasts/{id}): its message's title, body, image, data
// and link key as the submit takes them (all replaced), and, when SendAt
// is given, its new send time (RFC 3339). The broadcast service checks it
// as a Spec on the broadcast's stored audience, app and category.
type EditSpec struct {
	Title       string            `json:"title"`
	Body        string            `json:"body"`
	Image       string            `json:"image"`
	Data        map[string]string `json:"data"`
	LinkDataKey string            `json:"link_data_key"`
	SendAt      string            `json:"send_at"`
}

// The refusals of an edit, which the API answers 409.
var (
	// ErrStarted: the broadcast is no longer scheduled or held (promoted,
	// released to go now, canceled, ended): too late to edit.
	ErrStarted = errors.New("broadcast has started or ended")
	// ErrReleased: an approver released it; what was approved goes as it
	// is (four eyes): cancel and submit again.
	ErrReleased = errors.New("broadcast was released; its approved message cannot change")
	// ErrNotEditable: its kind is not edited (A/B variants, localized
	// messages, local-time delivery, a resend): cancel and submit again.
	ErrNotEditable = errors.New("broadcast cannot be edited")
	// ErrEditFourEyes: with the four-eyes setting, a held broadcast is not
	// edited: its release approves the text its approver read, and an edit
	// between the reading and the release would go out unreviewed (409).
	ErrEditFourEyes = errors.New("with four eyes, a held broadcast awaiting its release is not edited")
)
