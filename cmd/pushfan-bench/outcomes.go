package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"time"
)

// outcomesReport is `pushfan-bench outcomes`: what keeping every target's
// outcome (target_outcomes, docs/outcomes.md) costs the sending path, and
// what it stores. Broadcasts to every token at pushfan's defaults (its
// rate limit and pace), keeping outcomes (PUSHFAN_OUTCOME_RETENTION's
// default) and keeping none (PUSHFAN_OUTCOME_RETENTION=0), alternating,
// each on a fresh serve, in one invocation. What a run with outcomes adds
// to the table is measured after ANALYZE TABLE as the growth of
// data_length + index_length over the run: the cost of one more broadcast
// beside those retained, the space their rows' deletes freed reused (the
// table is never emptied: an empty table's first pages would count).
type outcomesReport struct {
	With    []*outcomesRun `json:"with_outcomes"`
	Without []*outcomesRun `json:"without_outcomes"`
	// Medians, and with over without.
	WithSendsPerS, WithoutSendsPerS float64
	WithCPUMicros, WithoutCPUMicros float64
	ThroughputRatio, CPURatio       float64
	// TableBytes and TableTargets: the table at the end, and the targets
	// all its rows list (every broadcast kept in it, earlier invocations'
	// too): a run's growth comes in whole extents (1 MB), the total
	// averages them out.
	TableBytes, TableTargets int64
}

// outcomesRun is one broadcast and what target_outcomes held after it.
type outcomesRun struct {
	Run *pushfanRun `json:"run"`
	// Rows, Targets (the sum of n) and BlobBytes of the broadcast's rows;
	// TableBytes is the table's data_length + index_length after the run,
	// Grew how much that grew over it.
	Rows           int64   `json:"rows"`
	Targets        int64   `json:"targets"`
	BlobBytes      int64   `json:"blob_bytes"`
	TableBytes     int64   `json:"table_bytes"`
	Grew           int64   `json:"table_bytes_grew"`
	BytesPerTarget float64 `json:"table_bytes_per_target"` // Grew / Targets
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
			before, err := tableBytes(ctx, conn)
			if err != nil {
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
			run, err := measureOutcomes(ctx, conn, r, before)
			if err != nil {
				return err
			}
			b.logf("  %s: %.0f sends/s (sustained %.0f), %.1f µs CPU/send, peak RSS %.1f MB; kept %d rows of %d targets, %d bytes of blob; the table grew %d bytes (%.2f a target)",
				label, r.SendsPerS, r.SustainedPerS, r.CPUMicrosPerMsg, r.PeakRSSMB, run.Rows, run.Targets, run.BlobBytes, run.Grew, run.BytesPerTarget)
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
	if or.TableBytes, err = tableBytes(ctx, conn); err != nil {
		return err
	}
	if err := conn.QueryRowContext(ctx, "SELECT COALESCE(SUM(n), 0) FROM target_outcomes").Scan(&or.TableTargets); err != nil {
		return fmt.Errorf("reading the kept outcomes: %w", err)
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

// tableBytes is target_outcomes' data_length + index_length after ANALYZE
// TABLE (which refreshes information_schema's figures), once InnoDB's
// purge has had a few seconds to remove the rows a merge deleted; 0 before
// serve made the table (it migrates at start).
func tableBytes(ctx context.Context, conn *sql.DB) (int64, error) {
	var n int64
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = 'target_outcomes'`).Scan(&n); err != nil || n == 0 {
		return 0, err
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(5 * time.Second):
	}
	rows, err := conn.QueryContext(ctx, "ANALYZE TABLE target_outcomes")
	if err != nil {
		return 0, fmt.Errorf("analyze target_outcomes: %w", err)
	}
	rows.Close()
	if err := conn.QueryRowContext(ctx, `SELECT data_length + index_length FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = 'target_outcomes'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading target_outcomes' size: %w", err)
	}
	return n, nil
}

// measureOutcomes reads what run r's broadcast kept, and how much the
// table grew from before.
func measureOutcomes(ctx context.Context, conn *sql.DB, r *pushfanRun, before int64) (*outcomesRun, error) {
	run := &outcomesRun{Run: r}
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(n), 0), COALESCE(SUM(LENGTH(outcomes)), 0) FROM target_outcomes WHERE broadcast_id = ?", r.BroadcastID).
		Scan(&run.Rows, &run.Targets, &run.BlobBytes); err != nil {
		return nil, fmt.Errorf("reading the kept outcomes: %w", err)
	}
	var err error
	if run.TableBytes, err = tableBytes(ctx, conn); err != nil {
		return nil, err
	}
	if run.Grew = run.TableBytes - before; run.Targets > 0 {
		run.BytesPerTarget = float64(run.Grew) / float64(run.Targets)
	}
	return run, nil
}

func (or *outcomesReport) print(w io.Writer) {
	fmt.Fprintln(w, "what keeping every target's outcome costs the sending path (PUSHFAN_OUTCOME_RETENTION default vs 0; sustained rate, medians, alternating runs, a fresh serve each):")
	fmt.Fprintf(w, "  with outcomes    %8.0f sends/s  %6.1f µs CPU/send\n", or.WithSendsPerS, or.WithCPUMicros)
	fmt.Fprintf(w, "  without outcomes %8.0f sends/s  %6.1f µs CPU/send\n", or.WithoutSendsPerS, or.WithoutCPUMicros)
	fmt.Fprintf(w, "  with/without: throughput %.3f (target ≥ 0.97), CPU/send %.3f (target ≤ 1.03)\n", or.ThroughputRatio, or.CPURatio)
	for _, r := range or.With {
		fmt.Fprintf(w, "  kept by %s: %d rows, %d targets, %d bytes of blob; the table grew %d bytes to %d (ANALYZE TABLE; data_length + index_length): %.2f bytes a target, %.0f MB per 10M\n",
			r.Run.Label, r.Rows, r.Targets, r.BlobBytes, r.Grew, r.TableBytes, r.BytesPerTarget, r.BytesPerTarget*10)
	}
	if or.TableTargets > 0 {
		per := float64(or.TableBytes) / float64(or.TableTargets)
		fmt.Fprintf(w, "  the table now: %d bytes for the %d targets its rows list (every broadcast in it): %.2f bytes a target, %.0f MB per 10M\n", or.TableBytes, or.TableTargets, per, per*10)
	}
}
