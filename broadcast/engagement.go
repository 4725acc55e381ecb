package broadcast

import (
	"context"
	"time"

	"pushfan/broadcast/message"
	"pushfan/lease"
	"pushfan/model"
)

// Engagement is broadcast id's funnel after FCM accepted its sends
// (distinct targets per event type), with its localized variants' names
// in the engine's order: ByLocalized[i] is names[i-1].
// It is read at most BroadcastTTL ago, like Peek's row: the maps in it
// are shared and must not be modified.
func (s *Service) Engagement(ctx context.Context, b *model.Broadcast) (model.Engagement, []string, error) {
	names := message.VariantNames(b.Message.Localized) // with A/B variants, none: see ByVariant
	now := time.Now()
	if en, ok := s.reads.engagement.get(b.ID, now); ok {
		return en, names, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	en, err := s.store.Engagement(ctx, b.ID)
	if err != nil {
		return en, names, err
	}
	s.reads.engagement.put(b.ID, en, now)
	return en, names, nil
}

// EngagementSeries is broadcast id's events per bucket and type.
func (s *Service) EngagementSeries(ctx context.Context, id uint64, bucket time.Duration) ([]model.SeriesPoint, error) {
	if _, err := s.Get(ctx, id); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	return s.store.EngagementSeries(ctx, id, bucket)
}

// ClickLink is where a click on a message of broadcast id leads: its link
// as stored (message.Link), of A/B variant variant (0: none), the data
// link or the web push one; "" when it has none.
func (s *Service) ClickLink(ctx context.Context, id uint64, variant int, data bool) (string, error) {
	b, err := s.Peek(ctx, id)
	if err != nil {
		return "", err
	}
	return message.Link(b.Message, variant, data), nil
}

// EngagementTotals are the engagement counts of each of ids.
func (s *Service) EngagementTotals(ctx context.Context, ids []uint64) (map[uint64]model.EventCounts, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	return s.store.EngagementTotals(ctx, ids)
}

// SendRate is broadcast id's outcomes per bucket since since, oldest
// first, and the buckets' width.
func (s *Service) SendRate(ctx context.Context, id uint64, since time.Time) ([]model.SeriesPoint, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	points, err := s.store.SendRate(ctx, id, since)
	return points, lease.RateBucket, err
}
