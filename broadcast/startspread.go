package broadcast

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"pushfan/model"
)

// The start spread. FCM documents its traffic more than doubling in the
// first 30 s to 2 min of every hour (smaller peaks at :15, :30, :45) and
// asks senders to avoid those peaks; scheduled broadcasts and cron jobs
// are exactly what lands on them. So a broadcast scheduled for send_at, or
// a cron fire, starts at starts_at: its requested time plus an offset in
// [0, Options.StartSpread) (PUSHFAN_START_SPREAD).
//
// The offset is derived from the broadcast, not drawn at random, so that
// every instance computes the same start for a cron fire (they all submit
// it; its idempotency key makes it one broadcast) and a retried submit does
// not re-roll it. It is also stored (starts_at), so changing the spread
// later moves no broadcast already scheduled.

// StartOffset is the start offset of the broadcast keyed by key under
// spread: in [0, spread), a function of key and spread alone, roughly
// uniform over keys. It has microsecond steps because starts_at is stored
// as DATETIME(6), so the stored start is exactly the computed one.
func StartOffset(key string, spread time.Duration) time.Duration {
	if spread < time.Microsecond {
		return 0
	}
	steps := uint64(spread / time.Microsecond)
	sum := sha256.Sum256([]byte(key))
	return time.Duration(binary.BigEndian.Uint64(sum[:8])%steps) * time.Microsecond
}

// startKey is what a broadcast's offset is derived from: its idempotency
// key when it has one (a cron fire always does: "cron:<job>:<fire time>",
// the same on every instance), else its submit token, stored with it and
// kept by a retried submit.
func startKey(b *model.Broadcast) string {
	if b.IdempotencyKey != "" {
		return b.IdempotencyKey
	}
	return b.SubmitToken
}

// startsAt is when b starts: a scheduled broadcast at send_at, a cron fire
// at its fire time, each plus its offset. It is nil for a broadcast that
// starts when submitted, and for a cron fire without a spread (it is queued
// at once, as before the spread existed). A scheduled broadcast without a
// spread starts at send_at.
func (s *Service) startsAt(b *model.Broadcast) *time.Time {
	var base time.Time
	switch {
	case b.SendAt != nil:
		base = *b.SendAt
	case b.Trigger == "cron" && b.FireTime != nil && s.opt.StartSpread > 0:
		base = *b.FireTime
	default:
		return nil
	}
	t := base.Add(StartOffset(startKey(b), s.opt.StartSpread)).UTC().Truncate(time.Microsecond)
	return &t
}
