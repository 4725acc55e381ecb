package view

import "pushfan/model"

// local is a local-time broadcast's part of the broadcast object:
// what was asked (send_at_local, quiet_hours), and the counts: targets
// still waiting for their zone's time (live), deferred by quiet hours, and
// whose zone was unknown (sent by the default zone). Absent on others.
type local struct {
	SendAtLocal   string            `json:"send_at_local,omitempty"`
	QuietHours    *model.QuietHours `json:"quiet_hours,omitempty"`
	Waiting       *int64            `json:"waiting,omitempty"`
	Deferred      *int64            `json:"deferred,omitempty"`
	ZoneFallbacks *int64            `json:"zone_fallbacks,omitempty"`
}

func localOf(b *model.Broadcast) local {
	l := b.Audience.Local
	if l == nil {
		return local{}
	}
	w, d, f := b.Waiting, b.Deferred, b.ZoneFallbacks
	return local{SendAtLocal: l.At, QuietHours: l.QuietHours, Waiting: &w, Deferred: &d, ZoneFallbacks: &f}
}
