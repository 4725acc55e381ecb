package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
)

// outcomesReport is `pushfan-bench outcomes`: what keeping every target's
// outcome (target_outcomes, docs/outcomes.md) costs the sending path, and
// what it stores. Broadcasts to every token at pushfan's defaults (its
// rate limit and pace), keeping outcomes (PUSHFAN_OUTCOME_RETENTION's
// default) and keeping none (PUSHFAN_OUTCOME_RETENTION=0), alternating,
// each on a fresh serve, in one invocation. The table is emptied before
// every run, so what a run with outcomes leaves is its broadcast's alone:
// measured after ANALYZE TABLE as data_length + index_length.
type outcomesReport struct {
	With    []*outcomesRun `json:"with_outcomes"`
	Without []*outcomesRun `json:"without_outcomes"`
	// Medians, and with over without.
	WithSendsPerS, WithoutSendsPerS float64
	WithCPUMicros, WithoutCPUMicros float64
	ThroughputRatio, CPURatio       float64
}

// outcomesRun is one broadcast and what target_outcomes held after it.
type outcomesRun struct {
	Run *pushfanRun `json:"run"`
	// Rows, Targets (the sum of n) and BlobBytes of the broadcast's rows;
	// TableBytes is the table's data_length + index_length.
	Rows           int64   `json:"rows"`
	Targets        int64   `json:"targets"`
	BlobBytes      int64   `json:"blob_bytes"`
	TableBytes     int64   `json:"table_bytes"`
	BytesPerTarget float64 `json:"table_bytes_per_target"`
}

func (b *bench) runOutcomes(ctx context.Context, rep *report) error {
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
	or := &outcomesReport{}
	rep.Outcomes = or
	for i := range o.repeat {
		for _, with := range []bool{i%2 == 0, i%2 != 0} { // alternate which goes first
			label, env := "with", o.serveEnv
			if !with {
				label, env = "without", append([]string{"PUSHFAN_OUTCOME_RETENTION=0"}, o.serveEnv...)
			}
			label = fmt.Sprintf("%s-outcomes-run%d", label, i+1)
			if err := emptyOutcomes(ctx, conn); err != nil {
				return err
			}
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
				return fmt.Errorf("%s: %d succeeded, %d missing at the emulator; want all %d sent", label, r.Succeeded, r.Missing, db.n)
			}
			run, err := measureOutcomes(ctx, conn, r)
			if err != nil {
				return err
			}
			b.logf("  %s: %.0f sends/s (sustained %.0f), %.1f µs CPU/send, peak RSS %.1f MB; kept %d rows of %d targets, %d bytes of blob, %d bytes of table (%.2f a target)",
				label, r.SendsPerS, r.SustainedPerS, r.CPUMicrosPerMsg, r.PeakRSSMB, run.Rows, run.Targets, run.BlobBytes, run.TableBytes, run.BytesPerTarget)
			if with {
				if run.Targets != int64(db.n) {
					return fmt.Errorf("%s: kept %d targets' outcomes, want all %d", label, run.Targets, db.n)
				}
				or.With = append(or.With, run)
			} else {
				if run.Rows != 0 {
					return fmt.Errorf("%s: kept %d rows with PUSHFAN_OUTCOME_RETENTION=0, want none", label, run.Rows)
				}
				or.Without = append(or.Without, run)
			}
		}
	}
	rate := func(r *outcomesRun) float64 {
		if r.Run.SustainedPerS > 0 {
			return r.Run.SustainedPerS
		}
		return r.Run.SendsPerS
	}
	cpu := func(r *outcomesRun) float64 { return r.Run.CPUMicrosPerMsg }
	or.WithSendsPerS, or.WithoutSendsPerS = medianOf(or.With, rate), medianOf(or.Without, rate)
	or.WithCPUMicros, or.WithoutCPUMicros = medianOf(or.With, cpu), medianOf(or.Without, cpu)
	if or.WithoutSendsPerS > 0 && or.WithoutCPUMicros > 0 {
		or.ThroughputRatio, or.CPURatio = or.WithSendsPerS/or.WithoutSendsPerS, or.WithCPUMicros/or.WithoutCPUMicros
	}
	return nil
}

// emptyOutcomes empties target_outcomes, if serve made it yet (it
// migrates at start).
func emptyOutcomes(ctx context.Context, conn *sql.DB) error {
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = 'target_outcomes'`).Scan(&n); err != nil || n == 0 {
		return err
	}
	if _, err := conn.ExecContext(ctx, "TRUNCATE TABLE target_outcomes"); err != nil {
		return fmt.Errorf("emptying target_outcomes: %w", err)
	}
	return nil
}

// measureOutcomes reads what run r's broadcast kept, and the table's size
// after ANALYZE TABLE (which refreshes information_schema's figures).
func measureOutcomes(ctx context.Context, conn *sql.DB, r *pushfanRun) (*outcomesRun, error) {
	run := &outcomesRun{Run: r}
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(n), 0), COALESCE(SUM(LENGTH(outcomes)), 0) FROM target_outcomes WHERE broadcast_id = ?", r.BroadcastID).
		Scan(&run.Rows, &run.Targets, &run.BlobBytes); err != nil {
		return nil, fmt.Errorf("reading the kept outcomes: %w", err)
	}
	rows, err := conn.QueryContext(ctx, "ANALYZE TABLE target_outcomes")
	if err != nil {
		return nil, fmt.Errorf("analyze target_outcomes: %w", err)
	}
	rows.Close()
	if err := conn.QueryRowContext(ctx, `SELECT data_length + index_length FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = 'target_outcomes'`).Scan(&run.TableBytes); err != nil {
		return nil, fmt.Errorf("reading target_outcomes' size: %w", err)
	}
	if run.Targets > 0 {
		run.BytesPerTarget = float64(run.TableBytes) / float64(run.Targets)
	}
	return run, nil
}

func (or *outcomesReport) print(w io.Writer) {
	fmt.Fprintln(w, "what keeping every target's outcome costs the sending path (PUSHFAN_OUTCOME_RETENTION default vs 0; sustained rate, medians, alternating runs, a fresh serve each):")
	fmt.Fprintf(w, "  with outcomes    %8.0f sends/s  %6.1f µs CPU/send\n", or.WithSendsPerS, or.WithCPUMicros)
	fmt.Fprintf(w, "  without outcomes %8.0f sends/s  %6.1f µs CPU/send\n", or.WithoutSendsPerS, or.WithoutCPUMicros)
	fmt.Fprintf(w, "  with/without: throughput %.3f (target ≥ 0.97), CPU/send %.3f (target ≤ 1.03)\n", or.ThroughputRatio, or.CPURatio)
	for _, r := range or.With {
		fmt.Fprintf(w, "  kept by %s: %d rows, %d targets, %d bytes of blob, %d bytes of table (ANALYZE TABLE; data_length + index_length): %.2f bytes a target, %.0f MB per 10M\n",
			r.Run.Label, r.Rows, r.Targets, r.BlobBytes, r.TableBytes, r.BytesPerTarget, r.BytesPerTarget*10)
	}
}
