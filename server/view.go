package server

import (
	"time"

	"pushfan/model"
	"pushfan/server/view"
)

// view is b's broadcast object now, with its expected finish.
func (s *Server) view(b *model.Broadcast) view.Broadcast {
	v := view.Of(b, s.now())
	if t := s.dom.Reader.ExpectedFinish(b); t != nil {
		u := t.UTC()
		v.ExpectedFinishAt = &u
	}
	return v
}

// BroadcastObject is b as the API shows it (GET /push/broadcasts/{id}
// without its live estimates): what a webhook carries.
func BroadcastObject(b *model.Broadcast) any { return view.Of(b, time.Now()) }
