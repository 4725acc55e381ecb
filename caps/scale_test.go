package caps_test

import (
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/internal/testsupport/teststack"
)

// The ledger's algorithm at 200,000 targets, proven by the rows the
// database reads (MariaDB's table statistics), not by timing: a capped
// broadcast reads each user's slots and answer a small fixed number of
// times (a page's users in one statement each, never a statement per
// target, see TestReserveStatementsPerPageDoNotGrowWithThePage), and the
// tokens once to send. A second broadcast, all of whose users are capped,
// sends nothing and reads as little.
func TestACappedBroadcastOf200kTargetsReadsTheLedgerLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 200,000 targets")
	}
	const users = 100000
	s := capStack(t, "1/day")
	n := int64(s.SeedZoned(users, 2, []string{"Asia/Seoul", "America/Los_Angeles", ""}))
	rr := testdb.NewRowsRead(t, s.SQL)
	tables := []string{"device_tokens", "users", "frequency_slots", "frequency_users"}
	for i, want := range []struct{ succeeded, capped int64 }{{n, 0}, {0, n}} {
		var f teststack.Broadcast
		read := rr.During(func() {
			b := submit(s, map[string]any{"title": "scale", "body": "x", "audience": map[string]any{"all": true}})
			f = s.WaitFinished(b.ID, 5*time.Minute)
		}, tables...)
		checkSums(t, f)
		if f.Status != "completed" || f.Succeeded != want.succeeded || f.Capped != want.capped {
			t.Fatalf("broadcast %d: %s, succeeded %d, capped %d; want completed, %d and %d", i+1, f.Status, f.Succeeded, f.Capped, want.succeeded, want.capped)
		}
		t.Logf("broadcast %d over %d targets (%d users): rows read %v", i+1, n, users, read)
		// The plan's scan, the count of its users' (users_targeted) and
		// the send's of the tokens (and their users): three reads a token
		// and a few more; a user's slots and answer a few times each.
		if read["device_tokens"] > 3*n+10 || read["users"] > 4*n || read["frequency_slots"] > 2*n || read["frequency_users"] > 4*n {
			t.Errorf("broadcast %d read %v rows for %d targets: more than a few reads per target", i+1, read, n)
		}
	}
	if got := s.Emu.Stats().Accepted; got != n {
		t.Errorf("the emulator accepted %d messages, want %d: the capped broadcast sent nothing", got, n)
	}
}
