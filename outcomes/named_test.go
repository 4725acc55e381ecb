package outcomes_test

import (
	"errors"
	"fmt"
	"testing"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/outcomes"
)

// A named audience whose query returns its cursor also as token_id
// (recorded on the broadcast as token_cursor) is read as the built-in
// audiences are: its export's lines equal targeted, each naming the
// token's user from the tokens table, and a user's look-up finds the
// broadcast with each of their devices' outcomes. A named audience
// without it keeps answering ErrNamed and stays out of the look-up.
func TestANamedAudienceWithTokenIDsIsListedByTokenAndUser(t *testing.T) {
	tdb := testdb.New(t)
	f := &fixture{t: t, db: tdb.SQL.DB, s: lease.New(tdb.SQL.DB, nil)}
	ctx := f.ctx()
	const n = 3000 // two checkpoints' rows
	// Users 1000..1099, 30 devices each, token ids interleaved: the
	// token id is not the user id.
	if _, err := f.db.ExecContext(ctx, "INSERT INTO users (id) SELECT 1000 + seq FROM seq_0_to_99"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.ExecContext(ctx, `INSERT INTO device_tokens (id, user_id, token, platform)
		SELECT seq, 1000 + seq % 100, CONCAT('t', seq), IF(seq % 2 = 0, 'android', 'ios') FROM seq_1_to_3000`); err != nil {
		t.Fatal(err)
	}
	kind := func(x uint64) (lease.OutcomeKind, string) {
		switch {
		case x%7 == 0:
			return lease.OutcomeFailed, "UNREGISTERED"
		case x%11 == 0:
			return lease.OutcomeCapped, ""
		}
		return lease.OutcomeSucceeded, ""
	}
	byToken := f.broadcast("by token", `{"name":"vips","token_cursor":true}`, 0, n, n, kind)
	plain := f.broadcast("by profile", `{"name":"vips"}`, 0, n, n, accepted)
	r := &outcomes.Reader{DB: f.db}

	var targeted int64
	if err := f.db.QueryRowContext(ctx, "SELECT targeted FROM broadcasts WHERE id = ?", byToken).Scan(&targeted); err != nil {
		t.Fatal(err)
	}
	lines, last := int64(0), uint64(0)
	byOutcome := map[string]int64{}
	if err := r.Export(ctx, byToken, 0, func(l outcomes.Line) error {
		k, code := kind(l.TokenID)
		if l.TokenID <= last || l.UserID != 1000+l.TokenID%100 || l.Outcome != outcomeName(k) || l.Code != code {
			return fmt.Errorf("line %+v after token %d", l, last)
		}
		last = l.TokenID
		lines++
		byOutcome[l.Outcome]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if lines != targeted || targeted != n || last != n {
		t.Fatalf("export: %d lines (last token %d), targeted %d, want %d", lines, last, targeted, n)
	}
	if byOutcome["failed"] != n/7 || byOutcome["capped"] != n/11-n/77 {
		t.Fatalf("export by outcome %v", byOutcome)
	}

	if err := r.Export(ctx, plain, 0, func(outcomes.Line) error { return nil }); !errors.Is(err, outcomes.ErrNamed) {
		t.Fatalf("export of a named audience without token_id: %v, want ErrNamed", err)
	}

	// User 1014: tokens 14, 114, ..., 2914; 14 failed, 2814 failed
	// (multiples of 7), 814 accepted, 1914 accepted.
	page, err := r.Deliveries(ctx, 1014, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Deliveries) != 1 || page.Deliveries[0].BroadcastID != byToken || page.Scanned != 2 {
		t.Fatalf("deliveries of user 1014: %s (scanned %d), want the token_id broadcast alone", summary(page), page.Scanned)
	}
	devs := page.Deliveries[0].Devices
	if len(devs) != 30 {
		t.Fatalf("user 1014 has %d devices in the broadcast, want 30", len(devs))
	}
	for i, d := range devs {
		tok := uint64(14 + 100*i)
		k, code := kind(tok)
		platform := "android"
		if tok%2 == 1 {
			platform = "ios"
		}
		if d.TokenID != tok || d.Outcome != outcomeName(k) || d.Code != code || d.Platform != platform {
			t.Errorf("device %d: %+v, want token %d %s %s %q", i, d, tok, platform, outcomeName(k), code)
		}
	}
}

func outcomeName(k lease.OutcomeKind) string {
	switch k {
	case lease.OutcomeFailed:
		return "failed"
	case lease.OutcomeCapped:
		return "capped"
	}
	return "accepted"
}
