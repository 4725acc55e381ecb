package outcomes_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/outcomes"
)

// audienceApps is the bundled device_tokens for every app, and the
// audience {"all":true} read as a run reads it: live tokens by id.
type audienceApps struct {
	outcomes.Apps
	db *sql.DB
}

func (a audienceApps) AudienceRange(ctx context.Context, _ uint64, after, upto uint64, limit int) ([]uint64, error) {
	rows, err := a.db.QueryContext(ctx, "SELECT id FROM device_tokens WHERE id > ? AND id <= ? AND invalidated_at IS NULL ORDER BY id LIMIT ?", after, upto, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// A broadcast canceled midway lists every target it counted: the export's
// lines equal targeted, the targets the cancel never read (the running
// chunk's rest, a chunk never claimed) as canceled, a thousand at a time
// from the audience; a user's device the cancel never read shows canceled.
func TestACanceledBroadcastsExportListsEveryTargeted(t *testing.T) {
	tdb := testdb.New(t)
	db := tdb.SQL.DB
	s := lease.New(db, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const n = 2600 // two chunks of 1,300: more than a page of the rest's audience read each
	if _, err := db.ExecContext(ctx, "INSERT INTO users (id) SELECT seq FROM seq_1_to_2600"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO device_tokens (id, user_id, token) SELECT seq, seq, CONCAT('t', seq) FROM seq_1_to_2600"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO broadcasts (message, audience, started_at) VALUES (JSON_OBJECT('title', 'sale'), '{"all":true}', UTC_TIMESTAMP(6))`)
	if err != nil {
		t.Fatal(err)
	}
	id64, _ := res.LastInsertId()
	id := uint64(id64)
	if err := lease.InsertChunks(ctx, tx, id, lease.Bulk, []lease.Plan{{Lo: 0, Hi: n / 2, Targets: n / 2}, {Lo: n / 2, Hi: n, Targets: n / 2}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, lease.ClaimOptions{Owner: "t", Lease: time.Minute})
	if err != nil || c == nil || c.Seq != 0 {
		t.Fatalf("claim: %+v %v", c, err)
	}
	// 1..100 sent, 101..105 read and canceled in flight.
	var sent []lease.TargetOutcome
	for x := uint64(1); x <= 100; x++ {
		sent = append(sent, lease.TargetOutcome{Cursor: x, Kind: lease.OutcomeSucceeded})
	}
	if _, err := s.Checkpoint(ctx, c, lease.Checkpoint{Cursor: 100, Succeeded: 100, End: lease.KeepLease, Lease: time.Minute,
		Outcomes: func() []lease.TargetOutcome { return sent }}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stop(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	var inFlight []lease.TargetOutcome
	for x := uint64(101); x <= 105; x++ {
		inFlight = append(inFlight, lease.TargetOutcome{Cursor: x, Kind: lease.OutcomeCanceled})
	}
	if r, err := s.Checkpoint(ctx, c, lease.Checkpoint{Cursor: n / 2, Canceled: 5, End: lease.Done, CancelRest: true,
		Outcomes: func() []lease.TargetOutcome { return inFlight }}); err != nil || r.Rest != n/2-105 {
		t.Fatalf("the closing checkpoint: %+v %v, want a rest of %d", r, err, n/2-105)
	}
	if ok, err := s.Finish(ctx, id); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	var targeted, succeeded, canceled int64
	if err := db.QueryRowContext(ctx, "SELECT targeted, succeeded, canceled FROM broadcasts WHERE id = ?", id).Scan(&targeted, &succeeded, &canceled); err != nil {
		t.Fatal(err)
	}
	if targeted != n || succeeded != 100 || canceled != n-100 {
		t.Fatalf("counted targeted %d succeeded %d canceled %d", targeted, succeeded, canceled)
	}
	r := &outcomes.Reader{DB: db, Apps: audienceApps{Apps: outcomes.Bundled(db), db: db}}
	byOutcome := map[string]int64{}
	next := uint64(0)
	if err := r.Export(ctx, id, 0, func(l outcomes.Line) error {
		if l.TokenID <= next || l.UserID != l.TokenID {
			return fmt.Errorf("line %+v after token %d", l, next)
		}
		next = l.TokenID
		byOutcome[l.Outcome]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if byOutcome["accepted"] != succeeded || byOutcome["canceled"] != canceled || len(byOutcome) != 2 || next != n {
		t.Fatalf("export %v (last token %d), counted %d accepted, %d canceled", byOutcome, next, succeeded, canceled)
	}
	for user, want := range map[uint64]string{50: "accepted", 103: "canceled", 1000: "canceled", 2000: "canceled"} {
		page, err := r.Deliveries(ctx, user, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Deliveries) != 1 || len(page.Deliveries[0].Devices) != 1 || page.Deliveries[0].Devices[0].Outcome != want {
			t.Fatalf("user %d: %s, want one device %s", user, summary(page), want)
		}
	}
}
