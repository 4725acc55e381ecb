package outcomes_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease/outcome"
	"pushfan/outcomes"
)

// BenchmarkLookup100Broadcasts times a user's deliveries (a page of 100,
// the user's 3 devices) with 100 broadcasts to all retained, each of
// PUSHFAN_BENCH_LOOKUP_TARGETS targets (default 1M; the 10M
// needs 1 GB of blobs) kept as dense checkpoints of 2,400: the first
// look-up, and the median and slowest of 20 after it.
func BenchmarkLookup100Broadcasts(b *testing.B) {
	targets := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("PUSHFAN_BENCH_LOOKUP_TARGETS")); err == nil && v > 0 {
		targets = v
	}
	const perRow, broadcasts = 2400, 100
	rows := (targets + perRow - 1) / perRow
	tdb := testdb.New(b)
	db := tdb.SQL.DB
	ctx := context.Background()
	mustExec := func(q string, args ...any) {
		b.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			b.Fatal(err)
		}
	}
	mustExec("INSERT INTO users (id) VALUES (42)")
	toks := []uint64{5000, uint64(targets / 2), uint64(targets - 1)}
	for i, id := range toks {
		mustExec("INSERT INTO device_tokens (id, user_id, token, platform) VALUES (?, 42, ?, 'android')", id, fmt.Sprintf("t%d", i))
	}
	mustExec(fmt.Sprintf(`INSERT INTO broadcasts (id, message, audience, started_at) SELECT seq, JSON_OBJECT('title', 't'), '{"all":true}', UTC_TIMESTAMP(6) FROM seq_1_to_%d`, broadcasts))
	// Every dense row of accepted targets has the same blob (gaps, not
	// cursors): built once, inserted for every row.
	outs := make([]outcome.Target, perRow)
	for i := range outs {
		outs[i] = outcome.Target{Cursor: uint64(i + 1), Kind: outcome.Succeeded}
	}
	blob := outcome.Encode(1, outs)
	began := time.Now()
	for bc := 1; bc <= broadcasts; bc++ {
		mustExec(fmt.Sprintf(`INSERT INTO target_outcomes (broadcast_id, seq, epoch, ckpt_seq, part, lo, hi, n, outcomes, created_at)
			SELECT ?, (seq - 1) DIV 5, 1, seq, 0, (seq - 1) * %d + 1, seq * %d, %d, ?, UTC_TIMESTAMP(6) FROM seq_1_to_%d`, perRow, perRow, perRow, rows), bc, blob)
	}
	b.Logf("seeded %d broadcasts of %d targets (%d rows) in %s", broadcasts, rows*perRow, broadcasts*rows, time.Since(began).Round(time.Second))
	r := &outcomes.Reader{DB: db}
	for b.Loop() {
		var times []time.Duration
		for i := range 21 {
			t0 := time.Now()
			page, err := r.Deliveries(ctx, 42, 100, 0)
			d := time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			if len(page.Deliveries) != broadcasts || len(page.Deliveries[0].Devices) != len(toks) {
				b.Fatalf("page: %d deliveries, %d devices", len(page.Deliveries), len(page.Deliveries[0].Devices))
			}
			if i == 0 {
				b.ReportMetric(float64(d.Microseconds())/1000, "ms-first")
				continue
			}
			times = append(times, d)
		}
		slices.Sort(times)
		b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median")
		b.ReportMetric(float64(times[len(times)-1].Microseconds())/1000, "ms-slowest")
	}
}
