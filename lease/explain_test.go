package lease_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
)

// The two claim statements stay index range scans with a million chunk
// rows of other broadcasts present, pending and expired-lease alike. (A
// finished broadcast's rows are deleted by Finish; these are rows of
// broadcasts still running, the worst case for the scan.)
func TestClaimIsAnIndexRangeScanWithAMillionChunkRows(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts a million rows")
	}
	f := newFixture(t)
	// Inserting a million rows takes minutes on a loaded machine.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	// 1,000,000 done rows over 100 broadcasts: digits cross-joined.
	if _, err := f.db.ExecContext(ctx, `INSERT INTO broadcast_chunks (broadcast_id, seq, lo_id, hi_id, cursor_id, status, done_by)
		SELECT 1000 + (n DIV 10000), n MOD 10000, n, n + 1, n + 1, 'done', 'x' FROM (
			SELECT a.d + 10*b.d + 100*c.d + 1000*d.d + 10000*e.d + 100000*g.d AS n
			FROM (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
			     (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
			     (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c,
			     (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) d,
			     (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) e,
			     (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) g
		) nums`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.ExecContext(ctx, "ANALYZE TABLE broadcast_chunks"); err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted 1,000,000 done chunk rows in %v", time.Since(start).Round(time.Millisecond))
	id := f.broadcast(lease.Plan{Lo: 0, Hi: 10, Targets: 10}, lease.Plan{Lo: 10, Hi: 20, Targets: 10})

	for name, q := range map[string]string{
		"pending": `EXPLAIN SELECT broadcast_id, seq FROM broadcast_chunks FORCE INDEX (idx_chunks_pending)
			WHERE status = 'pending' AND app = 'default' AND broadcast_id NOT IN (7) ORDER BY class_rank, vseq, broadcast_id LIMIT 1 FOR UPDATE SKIP LOCKED`,
		"pending, two classes": `EXPLAIN SELECT broadcast_id, seq FROM broadcast_chunks FORCE INDEX (idx_chunks_pending)
			WHERE status = 'pending' AND app = 'default' AND class_rank IN (0,2) AND broadcast_id NOT IN (7) ORDER BY class_rank, vseq, broadcast_id LIMIT 1 FOR UPDATE SKIP LOCKED`,
		"expired": `EXPLAIN SELECT broadcast_id, seq FROM broadcast_chunks FORCE INDEX (idx_chunks_lease)
			WHERE status = 'leased' AND app = 'default' AND lease_until < UTC_TIMESTAMP(6) AND (broadcast_id, seq) NOT IN ((7, 1))
			ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED`,
	} {
		plan := testdb.Explain(t, f.db, q)
		t.Logf("EXPLAIN %s claim: %s", name, plan)
		if plan["type"] != "range" && plan["type"] != "ref" || !strings.HasPrefix(plan["key"], "idx_chunks_") || strings.Contains(plan["Extra"], "filesort") {
			t.Fatalf("%s claim is not an ordered index range scan: %v", name, plan)
		}
		if rows := plan["rows"]; len(rows) > 3 {
			t.Fatalf("%s claim estimates %s rows to examine, want a handful", name, rows)
		}
	}
	start = time.Now()
	c := f.claim("a")
	if c == nil || c.BroadcastID != id {
		t.Fatalf("claim %+v, want a chunk of broadcast %d", c, id)
	}
	t.Logf("claim with a million other chunk rows: %v", time.Since(start).Round(time.Microsecond))
}
