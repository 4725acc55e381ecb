package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

// spanGauges sets Share, Workers, InFlight and WaitPerS from the scrapes
// taken while r was between 10 % and 90 % of its audience (all of them
// when none was).
func (r *appRun) spanGauges() {
	var from, to int64 = 0, 1 << 62
	for _, s := range r.Samples {
		if s.Accepted < int64(r.N)/10 {
			from = s.AtMS
		}
		if s.Accepted >= int64(r.N)*9/10 && s.AtMS < to {
			to = s.AtMS
		}
	}
	var in []appGaugeSample
	for _, g := range r.Gauges {
		if g.AtMS >= from && g.AtMS <= to {
			in = append(in, g)
		}
	}
	if len(in) == 0 {
		in = r.Gauges
	}
	if len(in) == 0 {
		return
	}
	for _, g := range in {
		r.Share += g.Share / float64(len(in))
		r.Workers += g.Workers / float64(len(in))
		r.InFlight += g.InFlight / float64(len(in))
	}
	if first, last := in[0], in[len(in)-1]; last.AtMS > first.AtMS {
		r.WaitPerS = (last.Wait - first.Wait) * 1000 / float64(last.AtMS-first.AtMS)
	}
}

// scrapeAppGauges reads each app's share, workers, sends in flight and
// limiter wait from the serve's GET /metrics.
func scrapeAppGauges(ctx context.Context, svc *service) (map[string]appGaugeSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, svc.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := svc.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]appGaugeSample{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		app, ok := labelValue(labels, "app")
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscanf(value, "%g", &v); err != nil {
			continue
		}
		g := out[app]
		switch name {
		case "pushfan_rate_share":
			g.Share = v
		case "pushfan_fcm_workers":
			g.Workers = v
		case "pushfan_fcm_sends_in_flight":
			g.InFlight = v
		case "pushfan_rate_limiter_wait_seconds_total":
			g.Wait = v
		default:
			continue
		}
		out[app] = g
	}
	return out, nil
}

// staggerAt is the part of the first app's audience sent before the
// second app's broadcast starts, in a staggered run.
const staggerAt = 0.3

// staggerRun is a staggered run's figures: the first app's rate before
// the second started (from 10 % of its audience to the start), and each
// app's rate while both ran (from the second's 10 % to the first sample
// at which either had 90 %).
type staggerRun struct {
	Run         *appsLevel `json:"run"`
	FirstAlone  float64    `json:"first_alone_per_s"`
	FirstBeside float64    `json:"first_beside_per_s"`
	Second      float64    `json:"second_beside_per_s"`
}

func staggeredOf(lv *appsLevel) *staggerRun {
	st := &staggerRun{Run: lv}
	if len(lv.Apps) < 2 {
		return st
	}
	a, b := lv.Apps[0], lv.Apps[1]
	rate := func(s []sample, from, to int64) float64 {
		var x, y *sample
		for i := range s {
			if x == nil && s[i].AtMS >= from {
				x = &s[i]
			}
			if s[i].AtMS <= to {
				y = &s[i]
			}
		}
		if x == nil || y == nil || y.AtMS <= x.AtMS {
			return 0
		}
		return float64(y.Accepted-x.Accepted) * 1000 / float64(y.AtMS-x.AtMS)
	}
	at := func(s []sample, n int64) int64 {
		for _, x := range s {
			if x.Accepted >= n {
				return x.AtMS
			}
		}
		return 1 << 62
	}
	st.FirstAlone = rate(a.Samples, at(a.Samples, int64(a.N)/10), lv.StaggeredAtMS)
	from := at(b.Samples, int64(b.N)/10)
	to := min(at(a.Samples, int64(a.N)*9/10), at(b.Samples, int64(b.N)*9/10))
	st.FirstBeside, st.Second = rate(a.Samples, from, to), rate(b.Samples, from, to)
	return st
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// jointSustained is the apps' total accepted rate over the span in which
// every one of them was between 10 % and 90 % of its audience (their
// samples are taken together), or 0 when there was no such span.
func jointSustained(apps []*appRun) float64 {
	if len(apps) == 0 {
		return 0
	}
	n := len(apps[0].Samples)
	for _, r := range apps {
		n = min(n, len(r.Samples))
	}
	lo, hi := -1, -1
	for k := range n {
		all10, any90 := true, false
		for _, r := range apps {
			all10 = all10 && r.Samples[k].Accepted >= int64(r.N)/10
			any90 = any90 || r.Samples[k].Accepted >= int64(r.N)*9/10
		}
		if lo < 0 && all10 {
			lo = k
		}
		if any90 {
			hi = k
			break
		}
	}
	if lo < 0 || hi <= lo {
		return 0
	}
	var sent int64
	for _, r := range apps {
		sent += r.Samples[hi].Accepted - r.Samples[lo].Accepted
	}
	ms := apps[0].Samples[hi].AtMS - apps[0].Samples[lo].AtMS
	if ms <= 0 {
		return 0
	}
	return float64(sent) * 1000 / float64(ms)
}

func fmtQuotas(apps []*appRun) string {
	parts := make([]string, len(apps))
	for i, r := range apps {
		parts[i] = fmt.Sprintf("%.0f", r.Quota)
	}
	return strings.Join(parts, "+")
}

func (ar *appsReport) print(w io.Writer) {
	fmt.Fprintf(w, "\napps on one serve at its defaults, each app's emulator enforcing its rate_limit as its quota (per %s), one bulk broadcast per app (at once, but for the staggered run):\n", ar.Window)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "level\tapp\tquota/s\tN\tsustained/s\tof quota\twall s\t429s\tmissing\tshare/s\tworkers\tin flight\tlimiter wait s/s\t")
	levels := ar.Levels
	if ar.Staggered != nil {
		levels = append([]*appsLevel{ar.Staggered.Run}, levels...)
	}
	if ar.Alone != nil {
		levels = append([]*appsLevel{ar.Alone}, levels...)
	}
	for _, lv := range levels {
		for _, r := range lv.Apps {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%d\t%.0f\t%.1f%%\t%.1f\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.1f\t\n", lv.Label, r.App, r.Quota, r.N, r.SustainedPerS, 100*r.OfQuota,
				r.WallSeconds, r.Emu429, r.Missing, r.Share, r.Workers, r.InFlight, r.WaitPerS)
		}
		if len(lv.Apps) < 2 {
			continue
		}
		fmt.Fprintf(tw, "%s\tall\t%.0f\t\t%.0f\t%.1f%%\t%.1f\t\t\t\t\t\t\t\n", lv.Label, lv.Quota, lv.Sustained, 100*lv.Sustained/lv.Quota, lv.WallSeconds)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "level\ttotal quota/s\tsustained/s\tsends/s (wall)\tCPU µs/send\tpeak RSS MB\tload after\tevery app ≥ 95%\t")
	for _, lv := range levels {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%s\t%s\t\n", lv.Label, lv.Quota, lv.Sustained, lv.SendsPerS, lv.CPUMicrosPerMsg, lv.PeakRSSMB, lv.LoadAvg, yesNo(lv.KeptUp))
	}
	tw.Flush()
	if st := ar.Staggered; st != nil && len(st.Run.Apps) == 2 {
		a, b := st.Run.Apps[0], st.Run.Apps[1]
		fmt.Fprintf(w, "staggered: %s alone %.0f/s (%.1f%% of its %.0f/s); once %s started at %.0f%% of it: %s %.0f/s (%.1f%%), %s %.0f/s (%.1f%% of its %.0f/s)\n",
			a.App, st.FirstAlone, 100*st.FirstAlone/a.Quota, a.Quota, b.App, 100*staggerAt, a.App, st.FirstBeside, 100*st.FirstBeside/a.Quota,
			b.App, st.Second, 100*st.Second/b.Quota, b.Quota)
	}
	switch {
	case len(ar.Levels) == 0:
	case ar.FellShortAt > 0 && ar.KeptUpTo > 0:
		fmt.Fprintf(w, "one instance kept every app at ≥ 95%% of its quota up to %.0f/s in all; at %.0f/s it did not\n", ar.KeptUpTo, ar.FellShortAt)
	case ar.FellShortAt > 0:
		fmt.Fprintf(w, "one instance did not keep every app at ≥ 95%% of its quota even at %.0f/s in all\n", ar.FellShortAt)
	default:
		fmt.Fprintf(w, "one instance kept every app at ≥ 95%% of its quota at every level, up to %.0f/s in all\n", ar.KeptUpTo)
	}
}
