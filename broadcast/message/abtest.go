package message

import (
	"math/bits"

	"pushfan/fanout"
	"pushfan/model"
)

// PickVariant is the A/B variant of user in broadcast id, by weights: a
// hash of the two, so that every device of the user, every chunk and every
// instance (a takeover after a crash) picks the same one.
func PickVariant(id, user uint64, weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	if total <= 0 {
		return 0
	}
	// splitmix64's finalizer over both: every bit of id and user moves
	// every bit of h (FNV-1a's low bits followed the user id's parity),
	// then the high bits pick, scaled to total without a modulo's bias.
	h := mix(mix(id) ^ user)
	hi, _ := bits.Mul64(h, uint64(total))
	at := int(hi)
	for i, w := range weights {
		if at < w {
			return i
		}
		at -= w
	}
	return len(weights) - 1
}

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// ABVariants are the engine's variants of b's A/B variants: one message
// each, or one per language of a localized one ("a:ko", "a:default"),
// each built by prepare from the variant's stored message. Split maps an
// engine variant back to its A/B variant and localized variant (both from
// 1; the localized one 0 when the variant has none), for the event token.
func ABVariants(b *model.Broadcast, prepare func(model.Message) (*fanout.Message, error)) (v *fanout.Variants, split func(int) (ab, localized int), err error) {
	vs := b.Message.Variants
	type slot struct{ ab, loc int }
	var slots []slot
	v = &fanout.Variants{}
	weights := make([]int, len(vs))
	offsets := make([]int, len(vs))
	matchers := make([]*localeMatcher, len(vs))
	for i, ab := range vs {
		weights[i], offsets[i] = ab.Weight, len(v.Names)
		base, err := prepare(ab.Message)
		if err != nil {
			return nil, nil, err
		}
		loc := newLocaleMatcher(ab.Localized)
		if loc == nil {
			v.Names, v.Messages = append(v.Names, ab.Name), append(v.Messages, base)
			slots = append(slots, slot{i + 1, 0})
			continue
		}
		matchers[i] = loc
		for j, name := range loc.names {
			m := *base
			if j < len(loc.names)-1 {
				l := ab.Localized[name]
				m.Title, m.Body = l.Title, l.Body
			}
			v.Names, v.Messages = append(v.Names, ab.Name+":"+name), append(v.Messages, &m)
			slots = append(slots, slot{i + 1, j + 1})
		}
	}
	v.Pick = func(t fanout.Target) int {
		user := t.UserID
		if user == 0 {
			user = t.Cursor // an audience without user ids: per device
		}
		i := PickVariant(b.ID, user, weights)
		if m := matchers[i]; m != nil {
			return offsets[i] + m.pick(t.Locale)
		}
		return offsets[i]
	}
	return v, func(k int) (int, int) {
		if k < 0 || k >= len(slots) {
			return 0, 0
		}
		return slots[k].ab, slots[k].loc
	}, nil
}
