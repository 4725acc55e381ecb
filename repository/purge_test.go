package repository_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"pushfan/internal/platform/sqldb"
	"pushfan/internal/testsupport/testdb"
	"pushfan/repository"
)

// purgedTables are the tables with rows per broadcast that retention
// deletes with it.
var purgedTables = []string{
	"engagement_events", "broadcast_failures", "send_rate", "engagement_series", "broadcast_chunks", "webhook_outbox",
	"broadcast_errors", "engagement_counts", "engagement_open_delays", "fenced_sends", "late_holders", "broadcast_variants",
	"engagement_platform_counts",
}

// purgeFixture is a finished broadcast (done, ended 100 days ago, past
// the retention) between two running ones (early, started before it,
// and late), each with rows in every table retention deletes from: n
// engagement events, n/10 failures, send rates, series minutes and
// webhooks, n/100 chunks, and a few of the rest. done also has
// pendingHooks webhooks still waiting, which stay.
type purgeFixture struct {
	tdb               *testdb.DB
	store             *repository.Store
	early, done, late uint64
	cutoff            time.Time
}

const pendingHooks = 5

func newPurgeFixture(t *testing.T, running, due int) purgeFixture {
	t.Helper()
	tdb := testdb.New(t)
	f := purgeFixture{tdb: tdb, store: tdb.Store, cutoff: time.Now().Add(-90 * 24 * time.Hour)}
	insert := func(status, finished string) uint64 {
		res, err := tdb.SQL.Exec(`INSERT INTO broadcasts (message, audience, status, finished_at) VALUES ('{}', '{"all":true}', ?, `+finished+`)`, status)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		return uint64(id)
	}
	f.early = insert("running", "NULL")
	f.done = insert("completed", "UTC_TIMESTAMP(6) - INTERVAL 100 DAY")
	f.late = insert("running", "NULL")
	f.seed(t, f.early, running)
	f.seed(t, f.done, due)
	f.seed(t, f.late, running)
	return f
}

// seed writes b's rows, n engagement events and the rest in proportion.
func (f purgeFixture) seed(t *testing.T, b uint64, n int) {
	t.Helper()
	for _, q := range []string{
		"INSERT INTO engagement_events (broadcast_id, target_id, type, user_id, variant, localized, sent_at, at) SELECT %[1]d, seq, 1, seq, 0, 0, '2026-01-01', '2026-01-01' FROM seq_1_to_%[2]d",
		"INSERT INTO broadcast_failures (broadcast_id, token_id, user_id, code) SELECT %[1]d, seq, seq, 'UNREGISTERED' FROM seq_1_to_%[3]d",
		"INSERT INTO send_rate (broadcast_id, at, n) SELECT %[1]d, '2026-01-01' + INTERVAL seq SECOND, 1 FROM seq_1_to_%[3]d",
		"INSERT INTO engagement_series (broadcast_id, type, minute, n) SELECT %[1]d, 1, '2026-01-01' + INTERVAL seq MINUTE, 1 FROM seq_1_to_%[3]d",
		"INSERT INTO broadcast_chunks (broadcast_id, seq, lo_id, hi_id, cursor_id) SELECT %[1]d, seq, 0, 0, 0 FROM seq_1_to_%[4]d",
		"INSERT INTO webhook_outbox (msg_id, endpoint, type, broadcast_id, body, status) SELECT CONCAT(%[1]d, '-', seq), 'e', 'x', %[1]d, '{}', 'delivered' FROM seq_1_to_%[3]d",
		"INSERT INTO broadcast_errors (broadcast_id, code, count) VALUES (%[1]d, 'E1', 5), (%[1]d, 'E5', 7)",
		"INSERT INTO engagement_counts (broadcast_id, variant, localized, type, n) VALUES (%[1]d, 1, 1, 1, 3), (%[1]d, 1, 1, 2, 1)",
		"INSERT INTO engagement_open_delays (broadcast_id, bucket, n) VALUES (%[1]d, 5, 1), (%[1]d, 6, 1)",
		"INSERT INTO engagement_platform_counts (broadcast_id, platform, type, n) VALUES (%[1]d, 0, 2, 1), (%[1]d, 1, 2, 3)",
		"INSERT INTO fenced_sends (broadcast_id, seq, epoch, ckpt_seq, outcomes) VALUES (%[1]d, 5, 1, 1, ''), (%[1]d, 6, 1, 1, '')",
		"INSERT INTO late_holders (broadcast_id, seq, epoch, ckpt_seq, rest, closed_at) VALUES (%[1]d, 5, 1, 1, 0, NOW()), (%[1]d, 6, 1, 1, 0, NOW())",
		"INSERT INTO broadcast_variants (broadcast_id, variant, targets) VALUES (%[1]d, 'm', 1), (%[1]d, 'n', 1)",
	} {
		exec(t, f.store, fmt.Sprintf(q, b, n, n/10, n/100))
	}
	if b == f.done {
		exec(t, f.store, fmt.Sprintf("INSERT INTO webhook_outbox (msg_id, endpoint, type, broadcast_id, body) SELECT CONCAT('p-', %[1]d, '-', seq), 'e', 'x', %[1]d, '{}' FROM seq_1_to_%[2]d", b, pendingHooks))
	}
}

// rows counts b's rows in each purged table.
func (f purgeFixture) rows(t *testing.T, b uint64) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range purgedTables {
		var n int
		if err := f.store.DB().QueryRow("SELECT COUNT(*) FROM "+table+" WHERE broadcast_id = ?", b).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

// impatient is a store on the fixture's database whose sessions wait at
// most a second for a row lock (innodb_lock_wait_timeout, 50 s by
// default): a statement that needs a lock another transaction holds
// fails with 1205 instead.
func (f purgeFixture) impatient(t *testing.T) *repository.Store {
	t.Helper()
	cfg, err := mysql.ParseDSN(f.tdb.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["innodb_lock_wait_timeout"] = "1"
	db, err := sqldb.Open(t.Context(), cfg.FormatDSN(), 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return repository.New(db, nil)
}

// Retention reads and locks only the rows of the broadcasts it deletes
// (issue 38, defect 1). Deleting "WHERE broadcast_id IN (SELECT id FROM
// broadcasts WHERE ... finished)" ran as a dependent subquery, a scan of
// the whole table that locked every row it read until the commit, the
// running broadcasts' rows too: their checkpoints and events waited for
// it, and timed out (1205).
//
// First, while another transaction holds every row of the two running
// broadcasts locked (a checkpoint writing them), a purge whose session
// waits at most a second for a lock deletes the finished broadcast
// without waiting. Then, while the purge's transaction is open with
// everything of the finished broadcast deleted (its locks held), a
// session as impatient updates every row of both running broadcasts and
// inserts rows below and above theirs, in every table: the purge holds
// no lock on them, nor on a gap beside them.
func TestPurgeNeitherWaitsForNorBlocksARunningBroadcast(t *testing.T) {
	const running, due = 3000, 4000 // more than a delete's batch
	f := newPurgeFixture(t, running, due)
	impatient := f.impatient(t)
	ctx := t.Context()
	want := f.rows(t, f.early)

	// A second finished broadcast, after late: the purge locks both
	// finished ones, and must not lock late, between them.
	exec(t, f.store, `INSERT INTO broadcasts (message, audience, status, finished_at) VALUES ('{}', '{"all":true}', 'completed', UTC_TIMESTAMP(6) - INTERVAL 100 DAY)`)
	checkpoint, err := f.store.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = checkpoint.Rollback() }()
	// One at a time, as a checkpoint does: a locking read of several
	// ids locks the row after each too (a range per id).
	for _, b := range []uint64{f.early, f.late} {
		if _, err := checkpoint.ExecContext(ctx, "SELECT id FROM broadcasts WHERE id = ? FOR UPDATE", b); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range purgedTables {
		// Through the broadcast's index, as a checkpoint finds them:
		// with a third of the rows wanted, the optimizer would scan
		// and lock the whole table.
		index := map[string]string{"broadcast_failures": "idx_broadcast_failures_broadcast_id", "webhook_outbox": "ix_webhook_broadcast"}[table]
		if index == "" {
			index = "PRIMARY"
		}
		for _, b := range []uint64{f.early, f.late} {
			if _, err := checkpoint.ExecContext(ctx, "SELECT broadcast_id FROM "+table+" FORCE INDEX ("+index+") WHERE broadcast_id = ? FOR UPDATE", b); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := impatient.PurgeFinished(ctx, f.cutoff, 0)
	if err != nil {
		t.Fatalf("the purge waited for the running broadcasts' locked rows: %v", err)
	}
	if err := checkpoint.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("purged %d broadcasts, want 2", n)
	}
	f.checkPurged(t, want)

	// Again, the purge's transaction held open, every row of the
	// finished broadcast deleted in it.
	exec(t, f.store, `INSERT INTO broadcasts (id, message, audience, status, finished_at) VALUES (?, '{}', '{"all":true}', 'completed', UTC_TIMESTAMP(6) - INTERVAL 100 DAY)`, f.done)
	exec(t, f.store, "DELETE FROM webhook_outbox WHERE broadcast_id = ?", f.done)
	f.seed(t, f.done, due)
	purge, err := f.store.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = purge.Rollback() }()
	if n, err := repository.PurgeInTx(ctx, purge, []uint64{f.done}, f.cutoff); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	for _, b := range []uint64{f.early, f.late} {
		for _, q := range []string{
			"UPDATE broadcasts SET succeeded = succeeded + 1 WHERE id = %[1]d",
			"UPDATE engagement_events FORCE INDEX (PRIMARY) SET at = NOW() WHERE broadcast_id = %[1]d",
			"INSERT INTO engagement_events (broadcast_id, target_id, type, user_id, variant, localized, sent_at, at) VALUES (%[1]d, 0, 1, 1, 0, 0, NOW(), NOW()), (%[1]d, 99999999, 1, 1, 0, 0, NOW(), NOW())",
			"UPDATE broadcast_failures FORCE INDEX (idx_broadcast_failures_broadcast_id) SET attempts = attempts + 1 WHERE broadcast_id = %[1]d",
			"INSERT INTO broadcast_failures (broadcast_id, token_id, user_id, code) VALUES (%[1]d, 0, 0, 'A'), (%[1]d, 99999999, 0, 'Z')",
			"UPDATE send_rate FORCE INDEX (PRIMARY) SET n = n + 1 WHERE broadcast_id = %[1]d",
			"INSERT INTO send_rate (broadcast_id, at, n) VALUES (%[1]d, '2020-01-01', 1), (%[1]d, '2030-01-01', 1)",
			"UPDATE engagement_series FORCE INDEX (PRIMARY) SET n = n + 1 WHERE broadcast_id = %[1]d",
			"INSERT INTO engagement_series (broadcast_id, type, minute, n) VALUES (%[1]d, 0, '2030-01-01', 1), (%[1]d, 9, '2030-01-01', 1)",
			"UPDATE broadcast_chunks FORCE INDEX (PRIMARY) SET claims = claims + 1 WHERE broadcast_id = %[1]d",
			"INSERT INTO broadcast_chunks (broadcast_id, seq, lo_id, hi_id, cursor_id) VALUES (%[1]d, 0, 0, 0, 0), (%[1]d, 99999999, 0, 0, 0)",
			"UPDATE webhook_outbox FORCE INDEX (ix_webhook_broadcast) SET attempts = attempts + 1 WHERE broadcast_id = %[1]d",
			"INSERT INTO webhook_outbox (msg_id, endpoint, type, broadcast_id, body) VALUES (CONCAT('new-', %[1]d), 'e', 'x', %[1]d, '{}'), (CONCAT('new2-', %[1]d), 'e', 'x', %[1]d, '{}')",
			"INSERT INTO broadcast_errors (broadcast_id, code, count) VALUES (%[1]d, 'A', 1), (%[1]d, 'E1', 1), (%[1]d, 'Z', 1) ON DUPLICATE KEY UPDATE count = count + 1",
			"INSERT INTO engagement_counts (broadcast_id, variant, localized, type, n) VALUES (%[1]d, 0, 0, 1, 1), (%[1]d, 1, 1, 1, 1), (%[1]d, 9, 9, 1, 1) ON DUPLICATE KEY UPDATE n = n + 1",
			"INSERT INTO engagement_open_delays (broadcast_id, bucket, n) VALUES (%[1]d, 0, 1), (%[1]d, 999, 1)",
			"INSERT INTO engagement_platform_counts (broadcast_id, platform, type, n) VALUES (%[1]d, 0, 1, 1), (%[1]d, 4, 4, 1) ON DUPLICATE KEY UPDATE n = n + 1",
			"INSERT INTO fenced_sends (broadcast_id, seq, epoch, ckpt_seq, outcomes) VALUES (%[1]d, 0, 1, 1, ''), (%[1]d, 99, 1, 1, '')",
			"INSERT INTO late_holders (broadcast_id, seq, epoch, ckpt_seq, rest, closed_at) VALUES (%[1]d, 0, 1, 1, 0, NOW()), (%[1]d, 99, 1, 1, 0, NOW())",
			"INSERT INTO broadcast_variants (broadcast_id, variant, targets) VALUES (%[1]d, 'a', 1), (%[1]d, 'z', 1)",
		} {
			// Each update goes through the broadcast's index, as a
			// checkpoint finds its rows: in these small tables the
			// optimizer would rather scan them whole.
			q = fmt.Sprintf(q, b)
			if _, err := impatient.DB().ExecContext(ctx, q); err != nil {
				t.Fatalf("running broadcast %d, while the purge's transaction is open: %s: %v", b, q, err)
			}
		}
	}
	if err := purge.Commit(); err != nil {
		t.Fatal(err)
	}
	for table, n := range f.rows(t, f.done) {
		if table == "webhook_outbox" && n == pendingHooks {
			continue
		}
		if n != 0 {
			t.Errorf("the finished broadcast kept %d rows of %s", n, table)
		}
	}
	for _, b := range []uint64{f.early, f.late} {
		if got := f.rows(t, b)["engagement_events"]; got != running+2 {
			t.Errorf("running broadcast %d has %d engagement events, want %d", b, got, running+2)
		}
	}
}

// checkPurged checks that the finished broadcast's rows are gone (but its
// waiting webhooks) and that both running ones have want.
func (f purgeFixture) checkPurged(t *testing.T, want map[string]int) {
	t.Helper()
	for table, n := range f.rows(t, f.done) {
		if table == "webhook_outbox" && n == pendingHooks {
			continue
		}
		if n != 0 {
			t.Errorf("the finished broadcast kept %d rows of %s", n, table)
		}
	}
	for _, b := range []uint64{f.early, f.late} {
		got := f.rows(t, b)
		for table, n := range want {
			if got[table] != n {
				t.Errorf("running broadcast %d has %d rows of %s, want %d", b, got[table], table, n)
			}
		}
	}
	var left int
	if err := f.store.DB().QueryRow("SELECT COUNT(*) FROM broadcasts WHERE id = ?", f.done).Scan(&left); err != nil || left != 0 {
		t.Errorf("the finished broadcast is still there (%d, %v)", left, err)
	}
}

// At scale: with 200,000 engagement events of two running broadcasts
// (and 20,000 failures, send rates, series minutes and webhooks), a
// purge of a finished broadcast with 10,000 reads its rows and a few
// more, not the running ones'.
func TestPurgeReadsOnlyTheFinishedBroadcastsRows(t *testing.T) {
	const running, due = 100000, 10000
	f := newPurgeFixture(t, running, due)
	want := f.rows(t, f.early)
	dueRows := f.rows(t, f.done)
	rr := testdb.NewRowsRead(t, f.tdb.SQL)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var n int
	read := rr.During(func() {
		var err error
		if n, err = f.store.PurgeFinished(ctx, f.cutoff, 0); err != nil {
			t.Fatal(err)
		}
	}, purgedTables...)
	t.Logf("purged a finished broadcast (rows %v) beside two running ones (rows %v each): rows read %v", dueRows, want, read)
	if n != 1 {
		t.Fatalf("purged %d broadcasts, want 1", n)
	}
	f.checkPurged(t, want)
	// Each row is read three times (its key; the delete's look-up; and
	// again by position, as a DELETE of a join deletes once the join
	// is read), plus a probe per batch and the waiting webhooks at each
	// look: ten times fewer than the running broadcasts have.
	for table, got := range read {
		if limit := int64(3*dueRows[table] + 100); got > limit {
			t.Errorf("the purge read %d rows of %s to delete %d: it read the running broadcasts' rows", got, table, dueRows[table])
		}
	}
}

// Every statement of the purge finds the rows through the broadcast's
// key: its keys' read is a range of the index starting with
// broadcast_id, and its delete a look-up of each key in the primary key
// (eq_ref), which locks that row only.
func TestPurgeStatementsUseTheBroadcastKey(t *testing.T) {
	f := newPurgeFixture(t, 300, 400)
	ctx := t.Context()
	stmts, args, err := repository.PurgeStatements(ctx, f.store.DB(), []uint64{f.done})
	if err != nil {
		t.Fatal(err)
	}
	for table, st := range stmts {
		for i, q := range st {
			rows, err := f.store.DB().QueryxContext(ctx, "EXPLAIN "+q, args[table][i]...)
			if err != nil {
				t.Fatalf("EXPLAIN %s: %v", q, err)
			}
			for rows.Next() {
				r := map[string]any{}
				if err := rows.MapScan(r); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprintf("%s", r["table"]) != "t" {
					continue
				}
				typ, key := fmt.Sprintf("%s", r["type"]), fmt.Sprintf("%s", r["key"])
				t.Logf("%s %s: %s on %s", table, []string{"read", "delete"}[i], typ, key)
				if i == 0 && typ != "range" && typ != "ref" || i == 1 && (typ != "eq_ref" || key != "PRIMARY") {
					t.Errorf("%s: %s on %s: %s", table, typ, key, q)
				}
			}
			rows.Close()
		}
	}
}
