package reads

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
func (r *Reader) Engagement(ctx context.Context, b *model.Broadcast) (model.Engagement, []string, error) {
	names := message.VariantNames(b.Message.Localized) // with A/B variants, none: see ByVariant
	now := time.Now()
	if en, ok := r.rows.engagement.get(b.ID, now); ok {
		return en, names, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.opt.DBTimeout)
	defer cancel()
	en, err := r.store.Engagement(ctx, b.ID)
	if err != nil {
		return en, names, err
	}
	r.rows.engagement.put(b.ID, en, now)
	return en, names, nil
}

// EngagementSeries is broadcast id's events per bucket and type.
func (r *Reader) EngagementSeries(ctx context.Context, id uint64, bucket time.Duration) ([]model.SeriesPoint, error) {
	if _, err := r.Get(ctx, id); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.opt.DBTimeout)
	defer cancel()
	return r.store.EngagementSeries(ctx, id, bucket)
}

// ClickLink is where a click on a message of broadcast id leads: its link
// as stored (message.Link), of A/B variant variant (0: none), the data
// link or the web push one; "" when it has none.
func (r *Reader) ClickLink(ctx context.Context, id uint64, variant int, data bool) (string, error) {
	b, err := r.Peek(ctx, id)
	if err != nil {
		return "", err
	}
	return message.Link(b.Message, variant, data), nil
}

// EngagementTotals are the engagement counts of each of ids.
func (r *Reader) EngagementTotals(ctx context.Context, ids []uint64) (map[uint64]model.EventCounts, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opt.DBTimeout)
	defer cancel()
	return r.store.EngagementTotals(ctx, ids)
}

// SendRate is broadcast id's outcomes per bucket since since, oldest
// first, and the buckets' width.
func (r *Reader) SendRate(ctx context.Context, id uint64, since time.Time) ([]model.SeriesPoint, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opt.DBTimeout)
	defer cancel()
	points, err := r.store.SendRate(ctx, id, since)
	return points, lease.RateBucket, err
}
