package run

import (
	"pushfan/broadcast/message"
	"pushfan/fanout"
	"pushfan/model"
)

// abVariants are the engine's variants of b's A/B variants, each message
// tracked as track tracks the broadcast's own, and the Job's Tag naming
// each send's A/B and localized variant (nil when untracked).
func (s *Runner) abVariants(b *model.Broadcast, d fanout.Delivery) (*fanout.Variants, func(fanout.Target, int) string, error) {
	tracked := s.opt.Tags != nil && !b.Message.Untracked()
	v, split, err := message.ABVariants(b, func(m model.Message) (*fanout.Message, error) {
		fm := message.Engine(m, d, b.DryRun)
		if !tracked {
			return fm, nil
		}
		return message.Track(fm, m, s.opt.Tags.ClickURL())
	})
	if err != nil || !tracked {
		return v, nil, err
	}
	return v, func(t fanout.Target, variant int) string {
		ab, loc := split(variant)
		return s.opt.Tags.Tag(b.ID, t.Cursor, t.UserID, ab, loc, t.Platform)
	}, nil
}
