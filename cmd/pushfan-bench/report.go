package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"pushfan/config"
)

type settings struct {
	N              int      `json:"n"`
	Concurrency    int      `json:"concurrency"`
	Latency        string   `json:"latency"`
	Jitter         string   `json:"jitter"`
	Mode           string   `json:"mode"`
	Repeat         int      `json:"repeat"`
	SmallN         int      `json:"small_n,omitempty"`
	ProbeN         int      `json:"probe_n,omitempty"`
	MulticastN     int      `json:"multicast_n,omitempty"`
	SeqN           int      `json:"seq_n,omitempty"`
	RateLimit      string   `json:"rate_limit"`
	Sweep          []int    `json:"sweep,omitempty"`
	SweepPerWorker int      `json:"sweep_per_worker,omitempty"`
	Quota          int      `json:"quota,omitempty"`
	QuotaWindow    string   `json:"quota_window,omitempty"`
	ServeEnv       []string `json:"serve_env,omitempty"`
	Latencies      []string `json:"latencies,omitempty"`
	LatencyModes   []string `json:"latency_modes,omitempty"`
}

func settingsOf(o options) settings {
	s := settings{N: o.n, Concurrency: o.c, Latency: o.latency.String(), Jitter: o.jitter.String(), Mode: o.mode,
		Repeat: o.repeat, RateLimit: o.rateLimit, ServeEnv: o.serveEnv}
	if s.RateLimit == "" {
		s.RateLimit = "default"
	}
	switch o.kind {
	case "bench":
		s.SmallN = o.smallN
		if o.baselines {
			s.ProbeN, s.MulticastN, s.SeqN = o.probeN, o.multiN, o.seqN
		}
	case "sweep":
		s.Sweep, s.SweepPerWorker = o.sweep, o.sweepPerWorker
	case "quota":
		s.Quota, s.QuotaWindow = o.quota, o.quotaWindow.String()
	case "apps":
		s.Concurrency = config.Defaults().Engine.Concurrency
		s.QuotaWindow = o.quotaWindow.String()
	case "latency":
		s.Concurrency = config.Defaults().Engine.Concurrency
		for _, l := range o.latencies {
			s.Latencies = append(s.Latencies, l.String())
		}
		s.LatencyModes = o.latencyModes
	}
	return s
}

// report is everything one invocation measured (the JSON file).
type report struct {
	Kind       string           `json:"kind"`
	StartedAt  time.Time        `json:"started_at"`
	FinishedAt time.Time        `json:"finished_at"`
	Commit     string           `json:"commit"`
	Machine    machine          `json:"machine"`
	Settings   settings         `json:"settings"`
	Pushfan    []*pushfanRun    `json:"pushfan,omitempty"`
	Probe      []*baselineRun   `json:"raw_probe,omitempty"`
	Small      []*pushfanRun    `json:"small_n,omitempty"`
	Multicast  *baselineRun     `json:"sdk_multicast,omitempty"`
	Sequential *baselineRun     `json:"sdk_sequential,omitempty"`
	Sweep      []*pushfanRun    `json:"sweep,omitempty"`
	Quota      *pushfanRun      `json:"quota,omitempty"`
	Latency    []*pushfanRun    `json:"latency_sweep,omitempty"`
	Scale      *scaleReport     `json:"scale,omitempty"`
	Events     *eventsReport    `json:"events,omitempty"`
	Webhooks   *webhooksReport  `json:"webhooks,omitempty"`
	Caps       *capsReport      `json:"caps,omitempty"`
	Outcomes   *outcomesReport  `json:"outcomes,omitempty"`
	Retention  *retentionReport `json:"retention,omitempty"`
	Apps       *appsReport      `json:"apps,omitempty"`
	Summary    *summary         `json:"summary,omitempty"`
	Targets    []target         `json:"targets,omitempty"`
}

// summary holds the medians over the repeats and the ratios quoted in the
// table. Paired ratios are taken run by run (pushfan run i against the probe
// that followed it), then the median over runs.
type summary struct {
	PushfanSendsPerS     float64 `json:"pushfan_sends_per_s"`
	PushfanCPUMicros     float64 `json:"pushfan_cpu_us_per_send"`
	PushfanPeakRSSMB     float64 `json:"pushfan_peak_rss_mb"`
	PushfanP50MS         float64 `json:"pushfan_latency_p50_ms,omitempty"`
	PushfanP95MS         float64 `json:"pushfan_latency_p95_ms,omitempty"`
	PushfanP99MS         float64 `json:"pushfan_latency_p99_ms,omitempty"`
	EmuCPUMicrosPerReq   float64 `json:"emulator_cpu_us_per_request"`
	ProbeSendsPerS       float64 `json:"probe_sends_per_s,omitempty"`
	ProbeCPUMicros       float64 `json:"probe_cpu_us_per_send,omitempty"`
	ThroughputVsProbe    float64 `json:"throughput_vs_probe,omitempty"`
	CPUVsProbe           float64 `json:"cpu_vs_probe,omitempty"`
	ThroughputVsMulti    float64 `json:"throughput_vs_multicast,omitempty"`
	ThroughputVsSeq      float64 `json:"throughput_vs_sequential,omitempty"`
	SmallColdMS          float64 `json:"small_cold_ms,omitempty"`
	SmallWarmMS          float64 `json:"small_warm_ms,omitempty"`
	MaxConnectionsPerRun int64   `json:"max_connections_per_run"`
}

type target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

func (r *report) hasData() bool {
	return len(r.Pushfan) > 0 || len(r.Sweep) > 0 || r.Quota != nil || len(r.Small) > 0 || len(r.Latency) > 0 || r.Scale != nil || r.Events != nil || r.Webhooks != nil || r.Caps != nil || r.Outcomes != nil || r.Apps != nil || r.Retention != nil
}

func medianOf[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if y := f(x); !math.IsNaN(y) && y != 0 {
			v = append(v, y)
		}
	}
	if len(v) == 0 {
		return 0
	}
	return median(v)
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func (r *report) summarize() {
	if len(r.Pushfan) == 0 && len(r.Small) == 0 {
		r.targetsOther()
		return
	}
	s := &summary{}
	runs := r.Pushfan
	s.PushfanSendsPerS = medianOf(runs, func(x *pushfanRun) float64 { return x.SendsPerS })
	s.PushfanCPUMicros = medianOf(runs, func(x *pushfanRun) float64 { return x.CPUMicrosPerMsg })
	s.PushfanPeakRSSMB = medianOf(runs, func(x *pushfanRun) float64 { return x.PeakRSSMB })
	s.PushfanP50MS = medianOf(runs, func(x *pushfanRun) float64 { return deref(x.LatencyP50MS) })
	s.PushfanP95MS = medianOf(runs, func(x *pushfanRun) float64 { return deref(x.LatencyP95MS) })
	s.PushfanP99MS = medianOf(runs, func(x *pushfanRun) float64 { return deref(x.LatencyP99MS) })
	s.EmuCPUMicrosPerReq = medianOf(runs, func(x *pushfanRun) float64 { return x.EmuCPUMicrosPerRq })
	for _, x := range runs {
		s.MaxConnectionsPerRun = max(s.MaxConnectionsPerRun, x.EmuConnections)
	}
	if len(r.Probe) > 0 {
		s.ProbeSendsPerS = medianOf(r.Probe, func(x *baselineRun) float64 { return x.SendsPerS })
		s.ProbeCPUMicros = medianOf(r.Probe, func(x *baselineRun) float64 { return x.CPUMicrosPerMsg })
		var tput, cpu []float64
		for i := range min(len(runs), len(r.Probe)) {
			if r.Probe[i].SendsPerS > 0 {
				tput = append(tput, runs[i].SendsPerS/r.Probe[i].SendsPerS)
			}
			if r.Probe[i].CPUMicrosPerMsg > 0 {
				cpu = append(cpu, runs[i].CPUMicrosPerMsg/r.Probe[i].CPUMicrosPerMsg)
			}
		}
		s.ThroughputVsProbe = medianOf(tput, func(x float64) float64 { return x })
		s.CPUVsProbe = medianOf(cpu, func(x float64) float64 { return x })
	}
	if r.Multicast != nil && r.Multicast.SendsPerS > 0 {
		s.ThroughputVsMulti = s.PushfanSendsPerS / r.Multicast.SendsPerS
	}
	if r.Sequential != nil && r.Sequential.SendsPerS > 0 {
		s.ThroughputVsSeq = s.PushfanSendsPerS / r.Sequential.SendsPerS
	}
	if len(r.Small) > 0 {
		s.SmallColdMS = r.Small[0].WallSeconds * 1000
		if len(r.Small) > 1 {
			s.SmallWarmMS = medianOf(r.Small[1:], func(x *pushfanRun) float64 { return x.WallSeconds * 1000 })
		}
	}
	r.Summary = s

	add := func(name, want, got string, met bool) {
		r.Targets = append(r.Targets, target{Name: name, Want: want, Got: got, Met: met})
	}
	if s.ThroughputVsProbe > 0 {
		add("throughput vs raw probe", "≥ 90%", fmt.Sprintf("%.0f%% (%.0f vs %.0f sends/s)", 100*s.ThroughputVsProbe, s.PushfanSendsPerS, s.ProbeSendsPerS), s.ThroughputVsProbe >= 0.9)
	}
	if s.ThroughputVsMulti > 0 {
		add("throughput vs SendEachForMulticast", "≥ 5x", fmt.Sprintf("%.1fx (%.0f vs %.0f sends/s)", s.ThroughputVsMulti, s.PushfanSendsPerS, r.Multicast.SendsPerS), s.ThroughputVsMulti >= 5)
	}
	if s.CPUVsProbe > 0 {
		add("service CPU per send vs raw probe", "≤ 1.2x", fmt.Sprintf("%.2fx (%.1f vs %.1f µs)", s.CPUVsProbe, s.PushfanCPUMicros, s.ProbeCPUMicros), s.CPUVsProbe <= 1.2)
	}
	if len(r.Small) > 0 {
		n := r.Small[0].N
		worst := 0.0
		for _, x := range r.Small {
			worst = max(worst, x.WallSeconds)
		}
		add(fmt.Sprintf("%d tokens through the API", n), "< 0.5 s", fmt.Sprintf("cold %.0f ms, warm %.0f ms", s.SmallColdMS, s.SmallWarmMS), worst < 0.5)
	}
	if len(runs) > 0 {
		want := "≤ 100 MB at 1M tokens (and ≤ +20% of the 100k run)"
		got := fmt.Sprintf("%.1f MB at %d tokens", s.PushfanPeakRSSMB, runs[0].N)
		add("peak RSS", want, got, s.PushfanPeakRSSMB <= 100)
	}
	var lost int64
	for _, x := range append(append([]*pushfanRun{}, runs...), r.Small...) {
		lost += max(x.Missing, 0)
	}
	add("tokens lost (every run)", "0", fmt.Sprint(lost), lost == 0)
}

// targetsOther fills the targets of a sweep, quota or latency run.
func (r *report) targetsOther() {
	limit := config.Defaults().Engine.RateLimit // the latency sweep runs at the defaults
	for _, x := range r.Latency {
		rate := x.SustainedPerS
		if rate == 0 {
			rate = x.SendsPerS
		}
		r.Targets = append(r.Targets, target{Name: fmt.Sprintf("rate at %s over %s", x.EmuLatency, x.Mode),
			Want: fmt.Sprintf("≥ 95%% of %.0f/s", limit),
			Got: fmt.Sprintf("%.0f/s = %.1f%% (%d in flight, %d connections, %.1f µs CPU/send, peak RSS %.0f MB)",
				rate, 100*rate/limit, x.EmuMaxInFlight, x.EmuConnections, x.CPUMicrosPerMsg, x.PeakRSSMB),
			Met: rate >= 0.95*limit && x.Missing == 0})
	}
	if q := r.Quota; q != nil {
		limit := float64(r.Settings.Quota) / parseDur(r.Settings.QuotaWindow).Seconds()
		rate := q.SustainedPerS
		if rate == 0 {
			rate = q.SendsPerS
		}
		r.Targets = append(r.Targets,
			target{Name: "sustained rate vs quota", Want: fmt.Sprintf("≥ 95%% of %.0f/s", limit),
				Got: fmt.Sprintf("%.0f/s = %.1f%% (whole run %.0f/s)", rate, 100*rate/limit, q.SendsPerS), Met: rate >= 0.95*limit},
			target{Name: "tokens lost", Want: "0", Got: fmt.Sprint(q.Missing), Met: q.Missing == 0 && q.Succeeded == int64(q.N)},
			target{Name: "429 answers", Want: "no storm", Got: fmt.Sprint(q.EmuByCode["RATE_LIMIT_EXCEEDED"]), Met: q.EmuByCode["RATE_LIMIT_EXCEEDED"] < int64(q.N)/100},
			target{Name: "peak RSS at this N", Want: "≤ 100 MB", Got: fmt.Sprintf("%.1f MB at %d tokens", q.PeakRSSMB, q.N), Met: q.PeakRSSMB <= 100},
		)
	}
}

func parseDur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Minute
	}
	return d
}

func yesNo(b bool) string {
	if b {
		return "met"
	}
	return "NOT met"
}

// blankZero formats v, or nothing when it was not measured (0).
func blankZero(v float64, format string) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf(format, v)
}

func msOrNA(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", *p)
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\npushfan-bench %s — %s, %d CPU (%s), %d MB; load %s → %s; commit %s\n",
		r.Kind, r.Settings.Mode, r.Machine.NumCPU, r.Machine.CPUModel, r.Machine.MemTotalMB, r.Machine.LoadAvg, r.Machine.LoadAvgEnd, r.Commit)
	fmt.Fprintf(w, "emulator latency %s + jitter %s; PUSHFAN_RATE_LIMIT %s", r.Settings.Latency, r.Settings.Jitter, r.Settings.RateLimit)
	if len(r.Settings.ServeEnv) > 0 {
		fmt.Fprintf(w, "; serve env %s", strings.Join(r.Settings.ServeEnv, " "))
	}
	fmt.Fprint(w, "\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "run\tN\tC\twall s\tsends/s\tsustained/s\tp50 ms\tp95 ms\tp99 ms\tCPU µs/send\tpeak RSS MB\temu µs/req\tconns\tmissing\t"
	pushRow := func(x *pushfanRun) {
		fmt.Fprintf(tw, "pushfan %s\t%d\t%d\t%.2f\t%.0f\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%d\t%d\t\n",
			x.Label, x.N, x.Concurrency, x.WallSeconds, x.SendsPerS, blankZero(x.SustainedPerS, "%.0f"),
			msOrNA(x.LatencyP50MS), msOrNA(x.LatencyP95MS), msOrNA(x.LatencyP99MS),
			x.CPUMicrosPerMsg, x.PeakRSSMB, x.EmuCPUMicrosPerRq, x.EmuConnections, x.Missing)
	}
	baseRow := func(x *baselineRun) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.1f\t\t%s\t%s\t%s\t%.1f\t\t%.1f\t%d\t%d err\t\n",
			x.Name, x.N, x.Concurrency, x.WallSeconds, x.SendsPerS,
			blankZero(x.LatencyP50MS, "%.1f"), blankZero(x.LatencyP95MS, "%.1f"), blankZero(x.LatencyP99MS, "%.1f"),
			x.CPUMicrosPerMsg, x.EmuCPUMicrosPerRq, x.EmuConnections, x.Errors)
	}
	if len(r.Pushfan)+len(r.Small)+len(r.Sweep) > 0 || r.Multicast != nil || r.Sequential != nil || r.Quota != nil {
		fmt.Fprintln(tw, header)
	}
	for i, x := range r.Pushfan {
		pushRow(x)
		if i < len(r.Probe) {
			baseRow(r.Probe[i])
		}
	}
	for _, x := range r.Small {
		pushRow(x)
	}
	if r.Multicast != nil {
		baseRow(r.Multicast)
	}
	if r.Sequential != nil {
		baseRow(r.Sequential)
	}
	for _, x := range r.Sweep {
		pushRow(x)
	}
	if r.Quota != nil {
		pushRow(r.Quota)
	}
	tw.Flush()

	if q := r.Quota; q != nil {
		fmt.Fprintf(w, "\nquota run: succeeded %d of %d, emulator accepted %d, requests %d, by code %v, requests during backoff %d\n",
			q.Succeeded, q.N, q.EmuAccepted, q.EmuRequests, q.EmuByCode, q.EmuDuringBackoff)
		if q.Tally != nil {
			fmt.Fprintf(w, "per-token counts: %d tokens seen, %d delivered, %d duplicates, at most %d requests for one token\n",
				q.Tally.Tokens, q.Tally.Delivered, q.Tally.Duplicates, q.Tally.MaxAttempt)
		}
	}
	if len(r.Latency) > 0 {
		fmt.Fprintln(w, "\nlatency sweep (pushfan's default configuration; one fresh serve and emulator per point):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "mode	latency	N	sends/s	sustained/s	emu max in flight	conns	peak RSS MB	CPU µs/send	p99 ms	missing	")
		for _, x := range r.Latency {
			fmt.Fprintf(tw, "%s	%s	%d	%.0f	%s	%d	%d	%.1f	%.1f	%s	%d	\n", x.Mode, x.EmuLatency, x.N, x.SendsPerS, blankZero(x.SustainedPerS, "%.0f"),
				x.EmuMaxInFlight, x.EmuConnections, x.PeakRSSMB, x.CPUMicrosPerMsg, msOrNA(x.LatencyP99MS), x.Missing)
		}
		tw.Flush()
	}
	if len(r.Sweep) > 0 {
		fmt.Fprintln(w, "\nsweep (one fresh serve per point; audience min(N, max(40000, SWEEP_PER_WORKER × C))):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "C\tN\tsends/s\tsustained/s\tCPU µs/send\tpeak RSS MB\tconns\temu max in flight\tp99 ms\t")
		for _, x := range r.Sweep {
			fmt.Fprintf(tw, "%d\t%d\t%.0f\t%s\t%.1f\t%.1f\t%d\t%d\t%s\t\n", x.Concurrency, x.N, x.SendsPerS, blankZero(x.SustainedPerS, "%.0f"),
				x.CPUMicrosPerMsg, x.PeakRSSMB, x.EmuConnections, x.EmuMaxInFlight, msOrNA(x.LatencyP99MS))
		}
		tw.Flush()
	}
	if r.Scale != nil {
		r.printScale(w)
	}
	if r.Events != nil {
		r.Events.print(w)
	}
	if r.Webhooks != nil {
		r.Webhooks.print(w)
	}
	if r.Caps != nil {
		r.Caps.print(w)
	}
	if r.Outcomes != nil {
		r.Outcomes.print(w)
	}
	if r.Retention != nil {
		r.Retention.print(w)
	}
	if r.Apps != nil {
		r.Apps.print(w)
	}
	if s := r.Summary; s != nil {
		fmt.Fprintf(w, "\nmedians over %d run(s): pushfan %.0f sends/s, %.1f µs CPU/send, peak RSS %.1f MB, emulator %.1f µs/request\n",
			len(r.Pushfan), s.PushfanSendsPerS, s.PushfanCPUMicros, s.PushfanPeakRSSMB, s.EmuCPUMicrosPerReq)
		var parts []string
		if s.ThroughputVsProbe > 0 {
			parts = append(parts, fmt.Sprintf("pushfan/raw probe %.2f", s.ThroughputVsProbe))
		}
		if s.ThroughputVsMulti > 0 {
			parts = append(parts, fmt.Sprintf("pushfan/multicast %.1fx", s.ThroughputVsMulti))
		}
		if s.ThroughputVsSeq > 0 {
			parts = append(parts, fmt.Sprintf("pushfan/sequential %.0fx", s.ThroughputVsSeq))
		}
		if s.CPUVsProbe > 0 {
			parts = append(parts, fmt.Sprintf("CPU/send pushfan/raw probe %.2f", s.CPUVsProbe))
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "ratios (paired per run, median): %s\n", strings.Join(parts, ", "))
		}
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w, "\ntargets:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, t := range r.Targets {
			fmt.Fprintf(tw, "  %s\twant %s\tgot %s\t%s\n", t.Name, t.Want, t.Got, yesNo(t.Met))
		}
		tw.Flush()
	}
}
