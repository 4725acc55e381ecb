package run

import (
	"pushfan/broadcast/message"
	"pushfan/fanout"
	"pushfan/model"
)

// track returns b's message as the engine sends it, tagged, and the Job's
// Tag of its sends; msg and a nil Tag when tracking is off or b says
// "track": false.
func (s *Runner) track(b *model.Broadcast, msg *fanout.Message) (*fanout.Message, func(fanout.Target, int) string, error) {
	if s.opt.Tags == nil || b.Message.Untracked() {
		return msg, nil, nil
	}
	tracked, err := message.Track(msg, b.Message, s.opt.Tags.ClickURL())
	if err != nil {
		return nil, nil, err
	}
	return tracked, func(t fanout.Target, variant int) string {
		// variant indexes the localized variants (the default last); -1:
		// the message has none.
		return s.opt.Tags.Tag(b.ID, t.Cursor, t.UserID, 0, variant+1, t.Platform)
	}, nil
}

// trackEach tags every personalized message of b as track tags the
// broadcast's own (templates render from the stored message, without its
// tag).
func (s *Runner) trackEach(b *model.Broadcast, p fanout.Personalizer) fanout.Personalizer {
	click := s.opt.Tags.ClickURL()
	return func(t fanout.Target) (*fanout.Message, error) {
		m, err := p(t)
		if err != nil {
			return nil, err
		}
		return message.Track(m, b.Message, click)
	}
}
