package lease_test

import (
	"testing"
	"time"

	"pushfan/lease"
	"pushfan/lease/outcome"
)

// perCheckpoint is a checkpoint's targets at the measured pace: 12,000
// sends/s (docs/PERFORMANCE.md, a 1M broadcast) and a checkpoint every
// 200 ms (PUSHFAN_FLUSH_INTERVAL).
const perCheckpoint = 2400

// BenchmarkCheckpointOutcomes is what keeping every target's outcome adds
// to a checkpoint: "without" counts perCheckpoint succeeded targets,
// "with" also lists them (Checkpoint.Outcomes, as the run does) and keeps
// them as a target_outcomes row. The difference per target, against the
// 52–61 µs CPU a send costs end to end, is the overhead (docs/CAPACITY.md).
func BenchmarkCheckpointOutcomes(b *testing.B) {
	for _, with := range []bool{false, true} {
		name := "without"
		if with {
			name = "with"
		}
		b.Run(name, func(b *testing.B) { benchCheckpointOutcomes(b, with) })
	}
}

func benchCheckpointOutcomes(b *testing.B, with bool) {
	db, s, c := claimBenchChunk(b, 10)
	ctx := b.Context()
	ids := make([]uint64, perCheckpoint)
	b.ReportAllocs()
	for b.Loop() {
		for i := range ids {
			ids[i] = c.Cursor + uint64(i) + 1
		}
		cp := lease.Checkpoint{Cursor: c.Cursor + perCheckpoint, Succeeded: perCheckpoint, End: lease.KeepLease, Lease: time.Minute}
		if with {
			// What the run's toLeaseOutcomes does from the engine's ids.
			cp.Outcomes = func() []lease.TargetOutcome {
				out := make([]lease.TargetOutcome, 0, len(ids))
				for _, id := range ids {
					out = append(out, lease.TargetOutcome{Cursor: id, Kind: lease.OutcomeSucceeded})
				}
				return out
			}
		}
		if _, err := s.Checkpoint(ctx, c, cp); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/perCheckpoint, "ns/target")
	if with {
		// What the table holds per target, as InnoDB counts it (after
		// ANALYZE: its statistics are otherwise sampled), and as blobs.
		if _, err := db.ExecContext(ctx, "ANALYZE TABLE target_outcomes"); err != nil {
			b.Fatal(err)
		}
		var data, index, blobs, n int64
		if err := db.QueryRowContext(ctx, `SELECT data_length, index_length FROM information_schema.tables
				WHERE table_schema = DATABASE() AND table_name = 'target_outcomes'`).Scan(&data, &index); err != nil {
			b.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(LENGTH(outcomes)), 0), COALESCE(SUM(n), 0) FROM target_outcomes").Scan(&blobs, &n); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(data+index)/float64(n), "table-B/target")
		b.ReportMetric(float64(blobs)/float64(n), "blob-B/target")
	}
}

// BenchmarkEncodeOutcomes is the CPU of listing and encoding one
// checkpoint's targets, without the database.
func BenchmarkEncodeOutcomes(b *testing.B) {
	ids := make([]uint64, perCheckpoint)
	for i := range ids {
		ids[i] = uint64(1_000_000 + i)
	}
	b.ReportAllocs()
	for b.Loop() {
		out := make([]lease.TargetOutcome, 0, len(ids))
		for _, id := range ids {
			out = append(out, lease.TargetOutcome{Cursor: id, Kind: lease.OutcomeSucceeded})
		}
		_ = outcome.Encode(out[0].Cursor, out)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/perCheckpoint, "ns/target")
}
