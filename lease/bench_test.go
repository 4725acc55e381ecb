package lease_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"pushfan/internal/devtools/demo"
	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	leasesends "pushfan/lease/sends"
	"pushfan/model"
	"pushfan/repository"
)

// BenchmarkCheckpoint measures one chunk checkpoint (what a running chunk
// stores every PUSHFAN_FLUSH_INTERVAL): one transaction that locks and
// fences the chunk row, moves its cursor and done ranges, renews its
// lease, adds the counters (and the sends per platform, in the same
// statement) to the broadcast and reads the cancel flag.
// "counters" is the common case; "failures=N" also stores N failure rows
// and invalidates N dead tokens. Reported per call and as checkpoints/s.
func BenchmarkCheckpoint(b *testing.B) {
	for _, failures := range []int{0, 50} {
		name := "counters"
		if failures > 0 {
			name = fmt.Sprintf("failures=%d", failures)
		}
		b.Run(name, func(b *testing.B) { benchCheckpoint(b, failures) })
	}
}

func benchCheckpoint(b *testing.B, failures int) {
	const users = 20_000
	_, s, c := claimBenchChunk(b, users)
	ctx := b.Context()
	next := uint64(1)
	b.ReportAllocs()
	for b.Loop() {
		cp := lease.Checkpoint{Cursor: c.Cursor + 500, Done: []lease.Range{{Lo: c.Cursor + 510, Hi: c.Cursor + 600}}, Succeeded: 590, End: lease.KeepLease, Lease: time.Minute,
			// Its sends per platform, added in the broadcasts row's UPDATE.
			Sends: leasesends.Split{Platforms: [4]leasesends.Sent{{Succeeded: 300}, {Succeeded: 200}, {Succeeded: 90}}}}
		if failures > 0 {
			fs := make([]model.Failure, failures)
			dead := make([]repository.Invalidation, failures)
			for j := range fs {
				tok := (next-1)%users + 1
				next++
				fs[j] = model.Failure{BroadcastID: c.BroadcastID, TokenID: tok, UserID: tok, Code: "UNREGISTERED", Message: "Requested entity was not found.", Attempts: 1}
				dead[j] = repository.Invalidation{TokenID: tok, Reason: "UNREGISTERED"}
			}
			cp.Failed, cp.Errors = int64(failures), map[string]int64{"UNREGISTERED": int64(failures)}
			cp.Effects = func(ctx context.Context, tx *sql.Tx) (int64, error) {
				return repository.WriteOutcomes(ctx, tx, fs, dead)
			}
		}
		if _, err := s.Checkpoint(ctx, c, cp); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checkpoints/s")
}

// claimBenchChunk seeds users (one token each) in a database of its own,
// makes a broadcast of one chunk spanning every id, and claims it: what a
// checkpoint benchmark checkpoints.
func claimBenchChunk(b *testing.B, users int) (*sql.DB, *lease.Store, *lease.Claim) {
	tdb := testdb.New(b)
	ctx := b.Context()
	if _, _, err := demo.New(tdb.SQL, nil).SeedDemo(ctx, demo.SeedOptions{Users: users, TokensPerUserMax: 1}); err != nil {
		b.Fatal(err)
	}
	db := tdb.SQL.DB
	s := lease.New(db, nil)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO broadcasts (message, audience) VALUES ('{}', '{"all":true}')`)
	if err != nil {
		b.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if err := lease.InsertChunks(ctx, tx, uint64(id), lease.Bulk, []lease.Plan{{Lo: 0, Hi: 1 << 40, Targets: 1 << 40}}); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	c, err := s.Claim(ctx, lease.ClaimOptions{Owner: "bench", Lease: time.Minute})
	if err != nil || c == nil {
		b.Fatalf("claim: %v %v", c, err)
	}
	return db, s, c
}
