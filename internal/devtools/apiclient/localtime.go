package apiclient

// LocalTime is a local-time broadcast's part of the broadcast object.
type LocalTime struct {
	SendAtLocal   string      `json:"send_at_local"`
	QuietHours    *QuietHours `json:"quiet_hours"`
	Waiting       *int64      `json:"waiting"`
	Deferred      *int64      `json:"deferred"`
	ZoneFallbacks *int64      `json:"zone_fallbacks"`
}

// QuietHours is a daily local-time window.
type QuietHours struct {
	Start string `json:"start"`
	End   string `json:"end"`
}
