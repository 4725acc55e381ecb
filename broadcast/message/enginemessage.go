package message

import (
	"time"

	"pushfan/fanout"
	"pushfan/model"
)

// Engine is the engine's message for a stored message: the one
// place a model.Message becomes what the FCM client encodes, so that a
// broadcast's chunks and a test send carry the same fields.
func Engine(m model.Message, d fanout.Delivery, dryRun bool) *fanout.Message {
	return &fanout.Message{
		Title: m.Title, Body: m.Body, Image: m.Image, Data: m.Data,
		Delivery: d,
		Platform: messagePlatform(m),
		DryRun:   dryRun,
	}
}

// Delivery is the delivery defaults of broadcast b under its app's
// defaults, for a message built at now (apns-expiration counts from it),
// with the broadcast's display tag.
func Delivery(b *model.Broadcast, defaults model.DeliveryDefaults, now time.Time) fanout.Delivery {
	return WithClass(Tag(b.ID), defaults.Of(b.Class), now)
}

// WithClass is the delivery of a message with display tag tag under the
// defaults of one class, built at now.
func WithClass(tag string, c model.DeliveryClass, now time.Time) fanout.Delivery {
	return fanout.Delivery{DisplayTag: tag, AndroidPriority: c.AndroidPriority, APNSPriority: c.APNSPriority, TTL: c.TTL, Built: now}
}
