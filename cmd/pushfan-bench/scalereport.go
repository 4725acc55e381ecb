package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// scaleReport is the scale run's figures (in the JSON file under "scale").
type scaleReport struct {
	Tokens      int     `json:"tokens"`
	Zones       int     `json:"zones"`
	RateLimit   float64 `json:"rate_limit_per_s"`
	SeedSeconds float64 `json:"seed_seconds,omitempty"`
	// BufferPoolMB is MariaDB's innodb_buffer_pool_size during the run
	// (and RaisedFromMB what it was, when the run raised it).
	BufferPoolMB  float64            `json:"buffer_pool_mb"`
	RaisedFromMB  float64            `json:"buffer_pool_raised_from_mb,omitempty"`
	SubmitMS      map[string]float64 `json:"submit_ms"`
	TargetedKnown map[string]float64 `json:"targeted_known_s"`
	// PacedSentBeforeTargeted is what the "all" at max_rate 50 had sent
	// when its exact targeted was known.
	PacedSentBeforeTargeted int64   `json:"paced_all_sent_before_targeted"`
	FirstSendMS             float64 `json:"first_send_ms"`
	// PerSecond is the emulator's accepted sends in each of the first 60
	// seconds of the 10M "all".
	PerSecond     []int64            `json:"sends_per_second"`
	First60PerS   float64            `json:"first_60s_per_s"`
	MinSecondPerS int64              `json:"min_second_per_s"`
	CancelMS      map[string]float64 `json:"cancel_ms"`
	Urgent        urgentFigures      `json:"three_user_send"`
	PeakRSSMB     float64            `json:"peak_rss_mb"`
	// RSSByPhase is the serve's highest resident set (sampled every 100
	// ms) while each phase of the run went on.
	RSSByPhase      map[string]float64 `json:"rss_mb_by_phase"`
	PlanRowsPerS    float64            `json:"plan_targets_per_s"`
	ChunkRowsPlaced int64              `json:"chunks_of_the_all"`
	// DB is what the server did per second over the first minute of the
	// "all" (SHOW GLOBAL STATUS deltas: statements and InnoDB rows), for
	// the capacity model; Tables the sizes of pushfan's tables then.
	DB     map[string]float64   `json:"db_per_second_first_minute"`
	Tables map[string]tableSize `json:"tables_during_the_all"`
	// Stale is what PUSHFAN_STALE_AFTER costs (scalestale.go).
	Stale *staleFigures `json:"stale_tokens,omitempty"`
	// Consent is what a category's consent costs a plan (scaleconsent.go).
	Consent *consentFigures `json:"consent,omitempty"`
	// Segment is a three-condition segment's preview and plan
	// (scalesegment.go).
	Segment *segmentFigures `json:"segment,omitempty"`
}

// urgentFigures are a 3-user transactional send's submit-to-delivered
// times (median of 20), idle and with 20 × 1M waiting.
type urgentFigures struct {
	IdleMS        float64 `json:"idle_median_ms"`
	WaitingMS     float64 `json:"with_waiting_median_ms"`
	Ratio         float64 `json:"ratio"`
	WaitingChunks int64   `json:"waiting_chunks"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// scaleTargets checks the scale run's figures against its targets.
func (r *report) scaleTargets() {
	s := r.Scale
	worstSubmit, worstCancel := 0.0, 0.0
	for _, v := range s.SubmitMS {
		worstSubmit = max(worstSubmit, v)
	}
	for _, v := range s.CancelMS {
		worstCancel = max(worstCancel, v)
	}
	limit := s.RateLimit
	r.Targets = append(r.Targets,
		target{Name: "every submit", Want: "≤ 1000 ms", Got: fmt.Sprintf("%.0f ms", worstSubmit), Met: worstSubmit <= 1000},
		target{Name: "from the first second", Want: fmt.Sprintf("≥ 97%% of %.0f/s every second", limit), Got: fmt.Sprintf("slowest second %d (%.1f%%)", s.MinSecondPerS, 100*float64(s.MinSecondPerS)/limit),
			Met: float64(s.MinSecondPerS) >= 0.97*limit},
		target{Name: "exact targeted of an all at max_rate 50", Want: "≤ 60 s", Got: knownGot(s.TargetedKnown, pacedAll), Met: knownWithin(s.TargetedKnown, pacedAll, 60)},
		slowestKnown(s.TargetedKnown),
		target{Name: "every cancel", Want: "≤ 1000 ms", Got: fmt.Sprintf("%.0f ms", worstCancel), Met: worstCancel <= 1000},
		target{Name: "a 3-user send with 20 × 1M waiting", Want: "≤ 1.5× idle", Got: fmt.Sprintf("%.2f×", s.Urgent.Ratio), Met: s.Urgent.Ratio <= 1.5},
		target{Name: "peak RSS", Want: "≤ 150 MB", Got: fmt.Sprintf("%.1f MB", s.PeakRSSMB), Met: s.PeakRSSMB <= 150},
	)
	if c := s.Consent; c != nil {
		r.Targets = append(r.Targets, target{Name: "plan of an advertising all (consent on half) over a plain all", Want: "≥ 0.8×",
			Got: fmt.Sprintf("%.2f×", c.Ratio), Met: c.Ratio >= 0.8})
	}
}

// printScale prints the scale run's figures.
func (r *report) printScale(w io.Writer) {
	s := r.Scale
	fmt.Fprintf(w, "\nscale: %d tokens in %d zones, one serve at its defaults (PUSHFAN_RATE_LIMIT %.0f)\n\n", s.Tokens, s.Zones, s.RateLimit)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "submit\tanswered ms\ttargeted known s")
	for _, k := range sortedKeys(s.SubmitMS) {
		known := ""
		if v, ok := s.TargetedKnown[k]; ok {
			known = fmt.Sprintf("%.1f", v)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\n", k, s.SubmitMS[k], known)
	}
	tw.Flush()
	if s.RaisedFromMB > 0 {
		fmt.Fprintf(w, "\nMariaDB buffer pool: %.0f MB for the run (the server's own: %.0f MB)\n", s.BufferPoolMB, s.RaisedFromMB)
	} else {
		fmt.Fprintf(w, "\nMariaDB buffer pool: %.0f MB (the server's own)\n", s.BufferPoolMB)
	}
	fmt.Fprintf(w, "plan of a send_at_local: %.0f targets/s; the 10M all: %d chunks\n", s.PlanRowsPerS, s.ChunkRowsPlaced)
	if v, ok := s.TargetedKnown[pacedAll]; ok {
		fmt.Fprintf(w, "exact targeted of an all at max_rate 50: %.1f s after its submit, %d sent by then\n", v, s.PacedSentBeforeTargeted)
	}
	fmt.Fprintf(w, "first send %.0f ms after the submit; %.0f sends/s over the first 60 s (%.1f%% of the limit); slowest second %d\n",
		s.FirstSendMS, s.First60PerS, 100*s.First60PerS/s.RateLimit, s.MinSecondPerS)
	fmt.Fprintf(w, "per second: %s\n", joinInts(s.PerSecond))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\ncancel while\tfinal after ms")
	for _, k := range sortedKeys(s.CancelMS) {
		fmt.Fprintf(tw, "%s\t%.0f\n", k, s.CancelMS[k])
	}
	tw.Flush()
	fmt.Fprintf(w, "\na 3-user send, submit to delivered (median of 20): %.1f ms idle, %.1f ms with %d waiting chunks (%.2fx)\n",
		s.Urgent.IdleMS, s.Urgent.WaitingMS, s.Urgent.WaitingChunks, s.Urgent.Ratio)
	fmt.Fprintf(w, "peak RSS of serve: %.1f MB\n", s.PeakRSSMB)
	for _, k := range sortedKeys(s.RSSByPhase) {
		fmt.Fprintf(w, "  RSS while %s: %.1f MB\n", k, s.RSSByPhase[k])
	}
	if st := s.Stale; st != nil {
		fmt.Fprintf(w, "\nPUSHFAN_STALE_AFTER, with %d tokens (every 4th) marked 40 days old (in %.1f s):\n", st.MarkedStale, st.MarkSeconds)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "setting\tpreview ms\tcount\tstale\tcount statement s\tplan of all s\ttargeted\twalk s\trows read\ttargets\tstatements")
		for _, k := range []string{"off", "30d"} {
			r := st.BySetting[k]
			fmt.Fprintf(tw, "%s\t%.0f\t%d\t%d\t%.1f\t%.1f\t%d\t%.1f\t%.0f\t%d\t%d\n", k, r.PreviewMS, r.PreviewCount, r.PreviewStale, r.CountSeconds,
				r.PlanSeconds, r.Targeted, r.WalkSeconds, r.WalkRowsRead, r.WalkTargets, r.WalkStatement)
		}
		tw.Flush()
		fmt.Fprintf(w, "walk rows read, 30d over off: %.3f\n", st.RowsReadRatio)
		for _, k := range []string{"off", "30d"} {
			fmt.Fprintf(w, "  EXPLAIN of a page (%s): %s\n", k, st.Explain[k])
		}
	}
	if c := s.Consent; c != nil {
		fmt.Fprintf(w, "\nconsent: %d users granted advertising (%d at night too), seeded in %.1f s; each all planned at max_rate 1, then canceled:\n", c.Granted, c.NightToo, c.SeedSeconds)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "category\tplan s\ttargeted\texcluded_no_consent\tnight_deferred\ttokens read/s")
		for _, k := range []string{"service", "advertising"} {
			r := c.Runs[k]
			fmt.Fprintf(tw, "%s\t%.1f\t%d\t%d\t%d\t%.0f\n", k, r.PlanSeconds, r.Targeted, r.Excluded, r.NightDeferred, r.TokensPerS)
		}
		tw.Flush()
		fmt.Fprintf(w, "plan throughput, advertising over plain: %.2fx\n", c.Ratio)
	}
	if g := s.Segment; g != nil {
		fmt.Fprintf(w, "\nsegment %s (columns written in %.1f s):\n", g.Filter, g.SeedSeconds)
		if g.PreviewError != "" {
			fmt.Fprintf(w, "  preview: %s\n", g.PreviewError)
		} else {
			fmt.Fprintf(w, "  preview: estimate %d tokens after %.0f ms; exact %d tokens (%d users) after %.0f ms\n", g.Estimate, g.EstimateMS, g.Exact, g.ExactUsers, g.ExactMS)
		}
		for _, k := range []string{"all", "segment"} {
			r := g.Runs[k]
			fmt.Fprintf(w, "  plan of %s at max_rate 1: %.1f s, %d targeted, %.0f tokens read/s\n", k, r.PlanSeconds, r.Targeted, r.TokensPerS)
		}
		fmt.Fprintf(w, "  plan throughput, segment over all: %.2fx\n", g.Ratio)
	}
	if len(s.DB) > 0 {
		fmt.Fprintf(w, "database per second over the first minute of the all:")
		for _, k := range dbCounters {
			fmt.Fprintf(w, " %s %.0f", k, s.DB[k])
		}
		fmt.Fprintln(w)
		for _, k := range []string{"broadcast_chunks", "broadcasts", "device_tokens", "users"} {
			t := s.Tables[k]
			fmt.Fprintf(w, "  %s: %d rows, %.1f MB data, %.1f MB index\n", k, t.Rows, float64(t.DataBytes)/1e6, float64(t.IndexBytes)/1e6)
		}
	}
}

// knownGot and knownWithin read a kind's time to its exact targeted.
func knownGot(known map[string]float64, kind string) string {
	if v, ok := known[kind]; ok {
		return fmt.Sprintf("%.1f s", v)
	}
	return "not measured"
}

// slowestKnown is the target on every kind's exact targeted (issue 38:
// within 60 s on 10M tokens, whatever the kind and the pace): the slowest
// kind is named; a kind whose plan never ended is not in the map, and the
// run failed before this.
func slowestKnown(known map[string]float64) target {
	t := target{Name: "exact targeted of every kind", Want: "≤ 60 s", Got: "not measured"}
	worst := ""
	for _, k := range sortedKeys(known) {
		if worst == "" || known[k] > known[worst] {
			worst = k
		}
	}
	if worst != "" {
		t.Got = fmt.Sprintf("%.1f s (%s)", known[worst], worst)
		t.Met = known[worst] <= 60
	}
	return t
}

func knownWithin(known map[string]float64, kind string, s float64) bool {
	v, ok := known[kind]
	return ok && v <= s
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func joinInts(xs []int64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, " ")
}
