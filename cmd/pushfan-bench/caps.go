package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
)

// capsReport is `pushfan-bench caps`: what the frequency-cap ledger costs
// the sending path. Broadcasts to every token at pushfan's defaults (its
// rate limit), with PUSHFAN_FREQUENCY_CAP=1/day and without, alternating,
// each on a fresh serve, in one invocation. The ledger is emptied after
// every capped run, so each is every user's first push of the day: every
// user reserves a slot and is sent, none is capped, and the runs send the
// same targets.
type capsReport struct {
	With    []*pushfanRun `json:"with_cap"`
	Without []*pushfanRun `json:"without_cap"`
	// Medians, and with over without.
	WithSendsPerS, WithoutSendsPerS float64
	WithCPUMicros, WithoutCPUMicros float64
	ThroughputRatio, CPURatio       float64
}

const benchCap = "1/day"

func (b *bench) runCaps(ctx context.Context, rep *report) error {
	o := b.o
	db, err := b.seeded(ctx, o.n)
	if err != nil {
		return err
	}
	emu, err := b.emulator(ctx, 0)
	if err != nil {
		return err
	}
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	cr := &capsReport{}
	rep.Caps = cr
	for i := range o.repeat {
		for _, with := range []bool{i%2 == 0, i%2 != 0} { // alternate which goes first
			label, env := "without", o.serveEnv
			if with {
				label, env = "with", append([]string{"PUSHFAN_FREQUENCY_CAP=" + benchCap}, o.serveEnv...)
			}
			label = fmt.Sprintf("%s-cap-run%d", label, i+1)
			svc, err := startService(ctx, o.bin, b.dir, "serve-"+label, emu, serviceSpec{db: db, concurrency: o.c, rateLimit: o.rateLimit, extraEnv: env})
			if err != nil {
				return err
			}
			b.procs = append(b.procs, svc.p)
			r, err := runBroadcast(ctx, svc, emu, broadcastSpec{label: label, n: db.n, conc: o.c, rateLimit: o.rateLimit, body: untrackedBody, sampleRate: true})
			svc.stop()
			if err != nil {
				return err
			}
			if r.Succeeded != int64(db.n) || r.Missing != 0 {
				return fmt.Errorf("%s: %d succeeded, %d missing at the emulator; want all %d sent (nobody is capped on their first push of the day)", label, r.Succeeded, r.Missing, db.n)
			}
			b.logf("  %s: %.0f sends/s (sustained %.0f), %.1f µs CPU/send, peak RSS %.1f MB", label, r.SendsPerS, r.SustainedPerS, r.CPUMicrosPerMsg, r.PeakRSSMB)
			if with {
				// A new day for every user before the next capped run (serve
				// made the tables: it migrates at start).
				for _, t := range []string{"frequency_slots", "frequency_users", "frequency_holds"} {
					if _, err := conn.ExecContext(ctx, "DELETE FROM "+t); err != nil {
						return fmt.Errorf("emptying %s: %w", t, err)
					}
				}
				cr.With = append(cr.With, r)
			} else {
				cr.Without = append(cr.Without, r)
			}
		}
	}
	rate := func(r *pushfanRun) float64 {
		if r.SustainedPerS > 0 {
			return r.SustainedPerS
		}
		return r.SendsPerS
	}
	cpu := func(r *pushfanRun) float64 { return r.CPUMicrosPerMsg }
	cr.WithSendsPerS, cr.WithoutSendsPerS = medianOf(cr.With, rate), medianOf(cr.Without, rate)
	cr.WithCPUMicros, cr.WithoutCPUMicros = medianOf(cr.With, cpu), medianOf(cr.Without, cpu)
	if cr.WithoutSendsPerS > 0 && cr.WithoutCPUMicros > 0 {
		cr.ThroughputRatio, cr.CPURatio = cr.WithSendsPerS/cr.WithoutSendsPerS, cr.WithCPUMicros/cr.WithoutCPUMicros
	}
	return nil
}

func (cr *capsReport) print(w io.Writer) {
	fmt.Fprintf(w, "the frequency cap's cost on the sending path (PUSHFAN_FREQUENCY_CAP=%s, every user's first push of the day; sustained rate, medians, alternating runs, a fresh serve each):\n", benchCap)
	fmt.Fprintf(w, "  with the cap    %8.0f sends/s  %6.1f µs CPU/send\n", cr.WithSendsPerS, cr.WithCPUMicros)
	fmt.Fprintf(w, "  without the cap %8.0f sends/s  %6.1f µs CPU/send\n", cr.WithoutSendsPerS, cr.WithoutCPUMicros)
	fmt.Fprintf(w, "  with/without: throughput %.3f (target ≥ 0.95), CPU/send %.3f\n", cr.ThroughputRatio, cr.CPURatio)
}
