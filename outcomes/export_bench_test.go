package outcomes_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease/outcome"
	"pushfan/outcomes"
)

// BenchmarkExport1M streams the export of a 1M-target broadcast (100
// chunks of 10,000, kept in checkpoints of 2,400) to nowhere: its time to
// the first line, its total, and the heap it holds (sampled every 10,000
// lines: flat if it holds a chunk, not the broadcast).
func BenchmarkExport1M(b *testing.B) { benchExport(b, 1_000_000) }

// BenchmarkExport10M is the same on 10M targets (1,000 chunks): minutes
// of seeding, so it runs only with PUSHFAN_BENCH_10M=1.
func BenchmarkExport10M(b *testing.B) {
	if os.Getenv("PUSHFAN_BENCH_10M") != "1" {
		b.Skip("seeds 10M tokens: set PUSHFAN_BENCH_10M=1")
	}
	benchExport(b, 10_000_000)
}

func benchExport(b *testing.B, targets int) {
	const chunk, perRow = 10_000, 2_400
	tdb := testdb.New(b)
	db := tdb.SQL.DB
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, fmt.Sprintf("INSERT INTO device_tokens (id, user_id, token) SELECT seq, seq, CONCAT('t', seq) FROM seq_1_to_%d", targets)); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO broadcasts (id, message, audience) VALUES (1, '{}', '{"all":true}')`); err != nil {
		b.Fatal(err)
	}
	var q strings.Builder
	var args []any
	rows := 0
	flush := func() {
		if rows == 0 {
			return
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO target_outcomes (broadcast_id, seq, epoch, ckpt_seq, part, lo, hi, n, outcomes, created_at) VALUES "+
			strings.TrimSuffix(q.String(), ", "), args...); err != nil {
			b.Fatal(err)
		}
		q.Reset()
		args, rows = args[:0], 0
	}
	for c := 0; c < targets/chunk; c++ {
		for lo := c*chunk + 1; lo <= (c+1)*chunk; lo += perRow {
			hi := min(lo+perRow-1, (c+1)*chunk)
			outs := make([]outcome.Target, 0, hi-lo+1)
			for x := lo; x <= hi; x++ {
				k := outcome.Succeeded
				if x%50 == 0 {
					outs = append(outs, outcome.Target{Cursor: uint64(x), Kind: outcome.Failed, Code: "UNREGISTERED"})
					continue
				}
				outs = append(outs, outcome.Target{Cursor: uint64(x), Kind: k})
			}
			q.WriteString("(1, ?, 1, ?, 0, ?, ?, ?, ?, UTC_TIMESTAMP(6)), ")
			args = append(args, c, lo, lo, hi, len(outs), outcome.Encode(uint64(lo), outs))
			if rows++; rows == 50 {
				flush()
			}
		}
	}
	flush()
	r := &outcomes.Reader{DB: db}
	for b.Loop() {
		began := time.Now()
		var first time.Duration
		var n int
		var peak uint64
		var ms runtime.MemStats
		if err := r.Export(ctx, 1, 0, func(l outcomes.Line) error {
			if n == 0 {
				first = time.Since(began)
			}
			if n++; n%10_000 == 0 {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if n != targets {
			b.Fatalf("%d lines, want %d", n, targets)
		}
		b.ReportMetric(float64(first.Microseconds())/1000, "ms-to-first-line")
		b.ReportMetric(time.Since(began).Seconds(), "s-total")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	}
}
