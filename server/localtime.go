package server

import "pushfan/model"

// localView is a local-time broadcast's part of the broadcast object:
// what was asked (send_at_local, quiet_hours), and the counts: targets
// still waiting for their zone's time (live), deferred by quiet hours, and
// whose zone was unknown (sent by the default zone). Absent on others.
type localView struct {
	SendAtLocal   string            `json:"send_at_local,omitempty"`
	QuietHours    *model.QuietHours `json:"quiet_hours,omitempty"`
	Waiting       *int64            `json:"waiting,omitempty"`
	Deferred      *int64            `json:"deferred,omitempty"`
	ZoneFallbacks *int64            `json:"zone_fallbacks,omitempty"`
}

func localOf(b *model.Broadcast) localView {
	l := b.Audience.Local
	if l == nil {
		return localView{}
	}
	w, d, f := b.Waiting, b.Deferred, b.ZoneFallbacks
	return localView{SendAtLocal: l.At, QuietHours: l.QuietHours, Waiting: &w, Deferred: &d, ZoneFallbacks: &f}
}
