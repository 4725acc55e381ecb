package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Report is the JSON written to -out.
type Report struct {
	StartedAt time.Time      `json:"started_at"`
	Host      HostInfo       `json:"host"`
	Settings  map[string]any `json:"settings"`
	RunA      BroadcastRun   `json:"run_a_no_load"`
	RunB      BroadcastRun   `json:"run_b_under_load"`
	RunC      *BroadcastRun  `json:"run_c_no_load_after,omitempty"`
	// BaselineTokensPerSec is run A's throughput, or the mean of A and C
	// with -bracket.
	BaselineTokensPerSec float64    `json:"baseline_tokens_per_sec"`
	Load                 LoadResult `json:"api_load"`
	// LoadAlone is the same hammering with no broadcast running (-api-alone).
	LoadAlone   *LoadResult         `json:"api_load_no_broadcast,omitempty"`
	DropPercent float64             `json:"throughput_drop_percent"`
	Targets     map[string]Verdict  `json:"targets"`
	Emulator    map[string]EmuStats `json:"emulator"`
}

type HostInfo struct {
	CPUs        int    `json:"cpus"`
	GoVersion   string `json:"go_version"`
	LoadAvgPre  string `json:"loadavg_before"`
	LoadAvgPost string `json:"loadavg_after"`
}

type Verdict struct {
	Target string `json:"target"`
	Value  string `json:"value"`
	Met    bool   `json:"met"`
}

// BroadcastRun is one 100k broadcast as the server reports it.
type BroadcastRun struct {
	ID            uint64           `json:"id"`
	Status        string           `json:"status"`
	Targeted      int64            `json:"targeted"`
	Succeeded     int64            `json:"succeeded"`
	Failed        int64            `json:"failed"`
	Canceled      int64            `json:"canceled"`
	Errors        map[string]int64 `json:"errors"`
	StartedAt     *time.Time       `json:"started_at"`
	FinishedAt    *time.Time       `json:"finished_at"`
	SendSeconds   float64          `json:"send_seconds"`   // finished_at - started_at
	TokensPerSec  float64          `json:"tokens_per_sec"` // targeted / send_seconds
	SubmitToFinal float64          `json:"submit_to_final_seconds"`
	// Resources used between submit and the final state, from the server's
	// /metrics (process CPU, database pool waits), the emulator's stats and
	// this driver's own rusage; absent when /metrics is not served.
	Resources map[string]float64 `json:"resources,omitempty"`
}

type LoadResult struct {
	Workers        int                    `json:"workers"`
	Requests       int64                  `json:"requests"`
	Errors         int64                  `json:"errors"`
	Seconds        float64                `json:"seconds"`
	RequestsPerSec float64                `json:"requests_per_sec"`
	StoppedBy      string                 `json:"stopped_by"` // broadcast_finished | max_requests | max_time
	Routes         map[string]RouteResult `json:"routes"`
}

type RouteResult struct {
	Requests       int64            `json:"requests"`
	Errors         int64            `json:"errors"`
	ErrorsByKind   map[string]int64 `json:"errors_by_kind,omitempty"`
	RequestsPerSec float64          `json:"requests_per_sec"`
	P50MS          float64          `json:"p50_ms"`
	P90MS          float64          `json:"p90_ms"`
	P99MS          float64          `json:"p99_ms"`
	P999MS         float64          `json:"p999_ms"`
	MaxMS          float64          `json:"max_ms"`
	MeanMS         float64          `json:"mean_ms"`
}

type EmuStats struct {
	CPUSeconds float64          `json:"cpu_seconds"`
	Requests   int64            `json:"requests"`
	Accepted   int64            `json:"accepted"`
	ByCode     map[string]int64 `json:"by_code"`
}

func printLoad(w io.Writer, title string, l LoadResult) {
	fmt.Fprintf(w, "\n== %s (%d workers, %.1fs, stopped by %s) ==\n", title, l.Workers, l.Seconds, l.StoppedBy)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "route\trequests\treq/s\terrors\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\t")
	names := make([]string, 0, len(l.Routes))
	for n := range l.Routes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		x := l.Routes[n]
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t\n", n, x.Requests, x.RequestsPerSec, x.Errors, x.P50MS, x.P90MS, x.P99MS, x.P999MS, x.MaxMS)
	}
	fmt.Fprintf(tw, "total\t%d\t%.0f\t%d\t\t\t\t\t\t\n", l.Requests, l.RequestsPerSec, l.Errors)
	tw.Flush()
}

func printTable(w io.Writer, r Report) {
	if r.LoadAlone != nil {
		printLoad(w, "control: API load with no broadcast running", *r.LoadAlone)
	}
	printLoad(w, "API under load while broadcast B runs", r.Load)

	fmt.Fprintf(w, "\n== broadcast throughput (%d tokens) ==\n", r.RunA.Targeted)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tid\tstatus\ttargeted\tsucceeded\tsend s\ttokens/s\t")
	type row struct {
		name string
		b    BroadcastRun
	}
	rows := []row{{"A: no API load", r.RunA}, {"B: under API load", r.RunB}}
	if r.RunC != nil {
		rows = append(rows, row{"C: no API load, after B", *r.RunC})
	}
	for _, x := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%.2f\t%.0f\t\n", x.name, x.b.ID, x.b.Status, x.b.Targeted, x.b.Succeeded, x.b.SendSeconds, x.b.TokensPerSec)
	}
	tw.Flush()
	baseline := "run A"
	if r.RunC != nil {
		baseline = "the mean of runs A and C"
	}
	fmt.Fprintf(w, "throughput drop under load: %.1f%% (B against %s, %.0f tokens/s)\n", r.DropPercent, baseline, r.BaselineTokensPerSec)
	if r.RunB.Resources != nil {
		fmt.Fprintf(w, "\n== CPU seconds and database pool waits, submit to final (%d CPUs) ==\n", r.Host.CPUs)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "run\twall s\tserver cpu\temulator cpu\tdriver cpu\tdb pool waits\tdb wait s\t")
		for _, x := range rows {
			res := x.b.Resources
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.2f\t\n", x.name, x.b.SubmitToFinal, res["server_cpu_seconds"], res["emulator_cpu_seconds"],
				res["driver_cpu_seconds"], res["db_pool_waits"], res["db_pool_wait_seconds"])
		}
		tw.Flush()
	}
	if r.RunA.TokensPerSec > 0 {
		fmt.Fprintf(w, "  B against run A alone: %.1f%%\n", 100*(r.RunA.TokensPerSec-r.RunB.TokensPerSec)/r.RunA.TokensPerSec)
	}

	fmt.Fprintf(w, "\n== targets ==\n")
	for _, k := range []string{"api_p99", "throughput_drop"} {
		v := r.Targets[k]
		mark := "MET"
		if !v.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "%-16s %-22s %-10s %s\n", k, v.Target, v.Value, mark)
	}
	fmt.Fprintf(w, "host: %d CPUs, load average %s before, %s after\n", r.Host.CPUs, r.Host.LoadAvgPre, r.Host.LoadAvgPost)
}
