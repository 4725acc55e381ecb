package repository_test

import (
	"fmt"
	"pushfan/internal/testsupport/testdb"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"pushfan/model"
)

func TestRecordAndListFailures(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	codes := []string{"UNREGISTERED", "INTERNAL", "QUOTA_EXCEEDED"}
	at := time.Date(2025, 3, 4, 5, 6, 7, 890123456, time.FixedZone("X", -5*3600))
	var fs []model.Failure
	for i := range 1234 { // three INSERT batches
		fs = append(fs, model.Failure{
			BroadcastID: 7, TokenID: uint64(1000 + i), UserID: uint64(i), Code: codes[i%3],
			Message: fmt.Sprintf("failure %d", i), Attempts: 1 + i%4, CreatedAt: at,
		})
	}
	fs = append(fs, model.Failure{BroadcastID: 8, TokenID: 1, UserID: 1, Code: "INTERNAL"}) // other broadcast, zero time
	if err := s.RecordFailures(ctx(t), fs); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordFailures(ctx(t), nil); err != nil {
		t.Fatal(err)
	}

	list := func(code string, limit int) []model.Failure {
		t.Helper()
		var all []model.Failure
		var after uint64
		for {
			page, err := s.ListFailures(ctx(t), 7, model.FailureFilter{Code: code}, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range page {
				if f.ID <= after {
					t.Fatalf("id %d after cursor %d", f.ID, after)
				}
				after = f.ID
			}
			all = append(all, page...)
			if len(page) < limit {
				return all
			}
		}
	}
	all := list("", 100)
	if len(all) != 1234 {
		t.Fatalf("listed %d failures, want 1234", len(all))
	}
	for i, f := range all {
		w := fs[i]
		if f.BroadcastID != 7 || f.TokenID != w.TokenID || f.UserID != w.UserID || f.Code != w.Code ||
			f.Message != w.Message || f.Attempts != w.Attempts || !f.CreatedAt.Equal(at.Truncate(time.Microsecond)) ||
			f.CreatedAt.Location() != time.UTC {
			t.Fatalf("failure %d: got %+v, want %+v", i, f, w)
		}
	}
	internal := list("INTERNAL", 33)
	if len(internal) != 411 {
		t.Fatalf("INTERNAL failures: %d, want 411", len(internal))
	}
	for _, f := range internal {
		if f.Code != "INTERNAL" {
			t.Fatalf("code filter leaked %q", f.Code)
		}
	}
	none, err := s.ListFailures(ctx(t), 7, model.FailureFilter{Code: "NOPE"}, 0, 10)
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("unknown code: %v (nil=%v), %v", none, none == nil, err)
	}
	other, err := s.ListFailures(ctx(t), 8, model.FailureFilter{}, 0, 10)
	if err != nil || len(other) != 1 || time.Since(other[0].CreatedAt) > time.Minute {
		t.Fatalf("broadcast 8: %+v, %v", other, err)
	}
}

// The user filter pages a user's failures by id, alone or with a code,
// and never lists another user's or another broadcast's.
func TestListFailuresOfOneUser(t *testing.T) {
	t.Parallel()
	tdb := testdb.New(t)
	s := tdb.Store
	var fs []model.Failure
	for i := range 30 {
		user := uint64(77 + i%3) // 77, 78, 79 interleaved
		fs = append(fs, model.Failure{BroadcastID: 9, TokenID: uint64(100 + i), UserID: user, Code: []string{"UNREGISTERED", "INTERNAL"}[i%2]})
	}
	fs = append(fs, model.Failure{BroadcastID: 10, TokenID: 1, UserID: 77, Code: "INTERNAL"})
	if err := s.RecordFailures(ctx(t), fs); err != nil {
		t.Fatal(err)
	}
	list := func(f model.FailureFilter) []model.Failure {
		t.Helper()
		var all []model.Failure
		var after uint64
		for {
			page, err := s.ListFailures(ctx(t), 9, f, after, 3)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range page {
				if x.ID <= after || x.UserID != f.UserID || (f.Code != "" && x.Code != f.Code) || x.BroadcastID != 9 {
					t.Fatalf("filter %+v after %d listed %+v", f, after, x)
				}
				after = x.ID
			}
			all = append(all, page...)
			if len(page) < 3 {
				return all
			}
		}
	}
	if got := list(model.FailureFilter{UserID: 77}); len(got) != 10 {
		t.Fatalf("user 77: %d failures, want 10", len(got))
	}
	// User 77 has i = 0, 3, 6, ..., 27: INTERNAL at the odd i (3, 9, 15, 21, 27).
	if got := list(model.FailureFilter{UserID: 77, Code: "INTERNAL"}); len(got) != 5 {
		t.Fatalf("user 77 INTERNAL: %d failures, want 5", len(got))
	}
	if got := list(model.FailureFilter{UserID: 5}); len(got) != 0 {
		t.Fatalf("user 5: %d failures, want 0", len(got))
	}

	// Among 20,000 other users' failures of the broadcast, one user's
	// pages read that user's rows (idx_broadcast_failures_user), not the
	// broadcast's.
	tdb.SQL.MustExec(`INSERT INTO broadcast_failures (broadcast_id, token_id, user_id, code, created_at)
		SELECT 9, 1000 + seq, 1000 + seq, 'UNREGISTERED', UTC_TIMESTAMP(6) FROM seq_1_to_20000`)
	tdb.SQL.MustExec("ANALYZE TABLE broadcast_failures")
	rr := testdb.NewRowsRead(t, tdb.SQL)
	var got []model.Failure
	read := rr.During(func() { got = list(model.FailureFilter{UserID: 77}) }, "broadcast_failures")
	if len(got) != 10 || read["broadcast_failures"] > 40 {
		t.Fatalf("user 77 among 20,000 others: %d failures reading %d rows, want 10 reading at most 40", len(got), read["broadcast_failures"])
	}
}

func TestRecordFailuresClampsMessage(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	long := strings.Repeat("é", 1500)    // 2 bytes per rune: cutting by bytes would split one
	bad := "bad \xff\xfe bytes"          // invalid UTF-8 is rejected by strict mode unless cleaned
	longCode := strings.Repeat("C", 100) // column is 64 characters
	err := s.RecordFailures(ctx(t), []model.Failure{
		{BroadcastID: 1, Code: "A", Message: long},
		{BroadcastID: 1, Code: "B", Message: bad},
		{BroadcastID: 1, Code: longCode, Attempts: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ListFailures(ctx(t), 1, model.FailureFilter{}, 0, 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("%v, %v", got, err)
	}
	if n := utf8.RuneCountInString(got[0].Message); n != 1024 || got[0].Message != strings.Repeat("é", 1024) {
		t.Fatalf("long message kept %d runes", n)
	}
	if got[1].Message != "bad \uFFFD bytes" {
		t.Fatalf("invalid UTF-8 stored as %q", got[1].Message)
	}
	if got[2].Code != strings.Repeat("C", 64) || got[2].Attempts != 0 {
		t.Fatalf("long code / negative attempts: %+v", got[2])
	}
}
