package model

// LocalDelivery is when a broadcast reaches each user by the user's own
// clock: At, a wall-clock time without offset ("2026-12-02T09:00:00") in
// each user's zone, and QuietHours, a daily window in which nobody is sent
// to (their sends wait for the window's end). It travels with the audience
// (stored in its JSON) because it is applied where the audience is planned.
type LocalDelivery struct {
	At         string      `json:"at,omitempty"`
	QuietHours *QuietHours `json:"quiet_hours,omitempty"`
	// Night is the category's night window (Category.Night): a user in it
	// without night consent waits for its end, as quiet hours make
	// everyone wait. Who has night consent the plan reads with the
	// audience (repository.PlanRow.Night).
	Night *QuietHours `json:"night,omitempty"`
}

// QuietHours is a daily local-time window, "HH:MM" or "HH:MM:SS"; Start
// after End wraps past midnight (22:00 to 08:00).
type QuietHours struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// ZoneFilter restricts a built-in audience to the users whose timezone
// column holds one of Names, or, with Null, no zone at all. It is a chunk's
// zone group, never part of the stored audience.
type ZoneFilter struct {
	Names []string `json:"names,omitempty"`
	Null  bool     `json:"null,omitempty"`
}
