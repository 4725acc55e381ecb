package repository_test

import (
	"fmt"
	"testing"
	"time"

	"pushfan/internal/testdb"
	"pushfan/repository"
)

// BenchmarkCheckpoint measures one chunk checkpoint (the counter flush a
// running chunk does every PUSHFAN_FLUSH_INTERVAL): one transaction that
// locks the chunk row, moves its cursor, renews its lease, adds the counters
// to the broadcast and reads the cancel flag. "counters" is the common case
// (only successes since the last flush); "failures=N" also stores N failure
// rows with their per-code counts and invalidates N dead tokens, as after a
// flush interval with N UNREGISTERED answers. Reported per call (ns/op) and
// as checkpoints/s.
func BenchmarkCheckpoint(b *testing.B) {
	for _, failures := range []int{0, 50, 500} {
		name := "counters"
		if failures > 0 {
			name = fmt.Sprintf("failures=%d", failures)
		}
		b.Run(name, func(b *testing.B) { benchCheckpoint(b, failures) })
	}
}

func benchCheckpoint(b *testing.B, failures int) {
	s, _ := testdb.New(b)
	ctx := b.Context()
	// Failures name real tokens, so that their invalidation does real work;
	// when every token has been used, they are made valid again (untimed).
	const users = 20_000
	if _, _, err := s.SeedDemo(ctx, repository.SeedOptions{Users: users, TokensPerUserMax: 1}); err != nil {
		b.Fatal(err)
	}
	var ids []uint64
	if err := s.DB().SelectContext(ctx, &ids, "SELECT id FROM device_tokens ORDER BY id"); err != nil {
		b.Fatal(err)
	}
	br := &repository.Broadcast{
		Message:  repository.Message{Title: "bench"},
		Audience: repository.Audience{All: true},
	}
	// One chunk covering every token.
	if err := s.SubmitBroadcast(ctx, br, 1<<40, 1); err != nil {
		b.Fatal(err)
	}
	const owner = "bench-instance"
	c, err := s.ClaimChunk(ctx, owner, time.Minute)
	if err != nil || c == nil {
		b.Fatalf("claim: %v, %v", c, err)
	}

	next := 0 // index in ids of the next token to fail
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		cp := repository.Checkpoint{
			From:      c.Cursor,
			Cursor:    c.Cursor + 1,
			Succeeded: 3000,
			End:       repository.KeepLease,
			Lease:     time.Minute,
		}
		if failures > 0 {
			cp.Failed = int64(failures)
			cp.Errors = map[string]int64{"UNREGISTERED": int64(failures)}
			cp.Failures = make([]repository.Failure, failures)
			cp.Dead = make([]repository.Invalidation, failures)
			if next+failures > len(ids) {
				b.StopTimer()
				if _, err := s.DB().ExecContext(ctx, "UPDATE device_tokens SET invalidated_at = NULL, invalid_reason = NULL"); err != nil {
					b.Fatal(err)
				}
				next = 0
				b.StartTimer()
			}
			for j := range failures {
				id := ids[next]
				next++
				cp.Failures[j] = repository.Failure{BroadcastID: br.ID, TokenID: id, UserID: id, Code: "UNREGISTERED",
					Message: "Requested entity was not found.", Attempts: 1}
				cp.Dead[j] = repository.Invalidation{TokenID: id, Reason: "UNREGISTERED"}
			}
		}
		res, err := s.Checkpoint(ctx, c, owner, cp)
		if err != nil {
			b.Fatal(err)
		}
		if res.Invalidated != int64(failures) {
			b.Fatalf("invalidated %d, want %d", res.Invalidated, failures)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checkpoints/s")
}
