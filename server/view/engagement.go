package view

import (
	"math"
	"strings"
	"time"

	"pushfan/model"
)

// Engagement is a broadcast's funnel after FCM accepted its sends:
// distinct targets per event type.
type Engagement struct {
	Counts
	// OpenRate is opened / succeeded (0 before any success).
	OpenRate float64 `json:"open_rate"`
	// TimeToOpen is from send to open, in seconds (within 5 %: a
	// histogram of 10 %-wide buckets); absent before any open.
	TimeToOpenP50 *float64 `json:"time_to_open_p50_s,omitempty"`
	TimeToOpenP90 *float64 `json:"time_to_open_p90_s,omitempty"`
	// Localized breaks the counts down by localized variant (language,
	// or "default"; a broadcast without A/B variants).
	Localized map[string]Counts `json:"localized,omitzero"`
	// Variants compares the A/B variants, in their order.
	Variants []AB `json:"variants,omitempty"`
}

// AB is one A/B variant's funnel, and its open rate against the first
// variant's: the difference and its 95 % confidence interval (normal
// approximation of two proportions; null until both have sends).
type AB struct {
	Name string `json:"name"`
	Sent int64  `json:"sent"`
	Counts
	OpenRate float64     `json:"open_rate"`
	Diff     *float64    `json:"open_rate_diff,omitempty"`
	CI95     *[2]float64 `json:"open_rate_diff_ci95,omitempty"`
}

// Counts are the distinct targets per event type.
type Counts struct {
	Received  int64 `json:"received"`
	Opened    int64 `json:"opened"`
	Clicked   int64 `json:"clicked"`
	Dismissed int64 `json:"dismissed"`
}

// CountsOf is c as the API shows it.
func CountsOf(c model.EventCounts) Counts {
	return Counts{Received: c.Received, Opened: c.Opened, Clicked: c.Clicked, Dismissed: c.Dismissed}
}

// EngagementOf is b's funnel from its engagement en; names are its
// localized variants' names, in their order.
func EngagementOf(b *model.Broadcast, en model.Engagement, names []string) *Engagement {
	v := &Engagement{Counts: Counts{Received: en.Received, Opened: en.Opened, Clicked: en.Clicked, Dismissed: en.Dismissed}}
	if b.Succeeded > 0 {
		v.OpenRate = float64(en.Opened) / float64(b.Succeeded)
	}
	seconds := func(d *time.Duration) *float64 {
		if d == nil {
			return nil
		}
		f := d.Seconds()
		return &f
	}
	v.TimeToOpenP50, v.TimeToOpenP90 = seconds(en.TimeToOpenP50), seconds(en.TimeToOpenP90)
	if vs := b.Message.Variants; len(vs) > 0 {
		v.Variants = ABs(vs, b.Variants, en.ByVariant)
		return v
	}
	for i, c := range en.ByLocalized {
		if i < 1 || i > len(names) {
			continue // 0: sent without variants
		}
		if v.Localized == nil {
			v.Localized = map[string]Counts{}
		}
		v.Localized[names[i-1]] = CountsOf(c)
	}
	return v
}

// Series is GET /push/broadcasts/{id}/engagement: events per bucket.
type Series struct {
	Bucket string        `json:"bucket"`
	Points []SeriesPoint `json:"points"`
}

// SeriesPoint is one bucket of a Series.
type SeriesPoint struct {
	At time.Time `json:"at"`
	Counts
}

// ABs compares A/B variants: sent is the targets the engine sent each
// (its localized ones summed), counts[i+1] the events of variant i.
func ABs(vs []model.ABVariant, sent map[string]int64, counts map[int]model.EventCounts) []AB {
	out := make([]AB, len(vs))
	for i, ab := range vs {
		a := AB{Name: ab.Name, Counts: CountsOf(counts[i+1])}
		for name, n := range sent {
			if name == ab.Name || strings.HasPrefix(name, ab.Name+":") {
				a.Sent += n
			}
		}
		if a.Sent > 0 {
			a.OpenRate = float64(a.Opened) / float64(a.Sent)
		}
		out[i] = a
	}
	base := out[0]
	for i := 1; i < len(out); i++ {
		x := &out[i]
		if x.Sent == 0 || base.Sent == 0 {
			continue
		}
		d := x.OpenRate - base.OpenRate
		se := math.Sqrt(x.OpenRate*(1-x.OpenRate)/float64(x.Sent) + base.OpenRate*(1-base.OpenRate)/float64(base.Sent))
		x.Diff, x.CI95 = &d, &[2]float64{d - 1.96*se, d + 1.96*se}
	}
	return out
}

// EngagementSummary is broadcast.engagement's data: the broadcast's
// outcome and its funnel (the API's engagement object) at a stage.
type EngagementSummary struct {
	BroadcastID uint64      `json:"broadcast_id"`
	After       string      `json:"after"`
	Status      string      `json:"status"`
	Targeted    int64       `json:"targeted"`
	Succeeded   int64       `json:"succeeded"`
	Failed      int64       `json:"failed"`
	FinishedAt  *time.Time  `json:"finished_at"`
	Engagement  *Engagement `json:"engagement"`
}
