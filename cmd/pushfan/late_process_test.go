//go:build !race

package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"pushfan/fcmemu"
	"pushfan/internal/devtools/demo"
	"pushfan/lease"
)

// A holder paused (SIGSTOP) past its lease, a cancel, the holder resumed
// (SIGCONT): the sends it made since its last checkpoint, and those in
// flight when it stopped, reached the emulator but were counted canceled
// by the cancel's close. Its checkpoints after it resumes must move them
// to succeeded, on a broadcast already final, so that succeeded is the
// emulator's distinct accepted targets and succeeded + canceled is the
// audience.
//
// The only instance is the one paused, so nobody takes its expired
// leases over; the cancel is therefore the lease store's Stop, the
// transition the API's cancel runs, called from the test (no other
// instance could serve the API without claiming the chunks first), and
// the test finishes the broadcast before the holder resumes, as another
// instance would have. The sends' timeout is raised past the pause, so
// that the in-flight sends' outcomes are the emulator's answers, not a
// timeout whose outcome nobody knows (a send that timed out while it was
// delivered is counted failed or canceled: a different, known limit).
func TestPausedHolderCountsItsSendsAfterACancel(t *testing.T) {
	const n = 60000
	e := newProcEnv(t, n, fcmemu.Config{})
	pause := e.cfg.Engine.Lease + 2*time.Second
	e.env = append(e.env, "PUSHFAN_SEND_TIMEOUT=60s")
	a := e.start("paused")
	b := e.submit(a)
	e.waitAccepted(0.2)
	if err := a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = a.Cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	stoppedAt := time.Now()
	// The emulator answers the sends in flight while the holder sleeps;
	// the wait is the pause itself, past the lease.
	time.Sleep(pause)
	leases := lease.New(e.pool.DB, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := leases.Stop(ctx, b.ID, ""); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if ok, err := leases.Finish(ctx, b.ID); err != nil || !ok {
		t.Fatalf("finishing the canceled broadcast: %v %v (a chunk was not closed: its lease had not expired?)", ok, err)
	}
	before := e.row(b.ID)
	accepted := e.distinctAccepted()
	if before.status != "canceled" || before.succeeded >= accepted {
		t.Fatalf("after the cancel: %+v with %d distinct targets accepted; want canceled, with delivered sends not yet counted (did the pause come after the work was done?)", before, accepted)
	}
	lateRows := e.lateHolders(b.ID)
	if lateRows == 0 {
		t.Fatal("the cancel closed no leased chunk: no late holder recorded")
	}
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	deadline := time.Now().Add(time.Minute)
	for e.lateHolders(b.ID) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 1m waiting for the resumed holder's last checkpoints: %d late holder rows left", e.lateHolders(b.ID))
		}
		time.Sleep(50 * time.Millisecond)
	}
	final := e.row(b.ID)
	got := e.distinctAccepted()
	if final.status != "canceled" || final.succeeded != got || final.failed != 0 ||
		final.succeeded+final.failed+final.canceled+final.capped != final.targeted || final.targeted != n {
		t.Fatalf("final %+v; want canceled, succeeded = the %d distinct targets the emulator accepted, and the counts adding up to %d", final, got, n)
	}
	t.Logf("paused %v (lease %v) at %d of %d sent; the cancel counted %d succeeded and %d canceled; the resumed holder's %d late checkpoints moved %d delivered targets out of canceled: final succeeded %d = distinct accepted, canceled %d; %d more sent after the resume before it saw the cancel; resumed at %v",
		pause, e.cfg.Engine.Lease, before.succeeded, n, before.succeeded, before.canceled, lateRows, final.succeeded-before.succeeded,
		final.succeeded, final.canceled, got-accepted, time.Since(stoppedAt).Round(time.Millisecond))
}

type countsRow struct {
	status                                        string
	targeted, succeeded, failed, canceled, capped int64
}

func (r countsRow) String() string {
	return fmt.Sprintf("%s: targeted %d, succeeded %d, failed %d, canceled %d, capped %d", r.status, r.targeted, r.succeeded, r.failed, r.canceled, r.capped)
}

// row reads broadcast id's counts from the database.
func (e *procEnv) row(id uint64) countsRow {
	e.t.Helper()
	var r countsRow
	if err := e.pool.QueryRow("SELECT status, targeted, succeeded, failed, canceled, capped FROM broadcasts WHERE id = ?", id).
		Scan(&r.status, &r.targeted, &r.succeeded, &r.failed, &r.canceled, &r.capped); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *procEnv) lateHolders(id uint64) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow("SELECT COUNT(*) FROM late_holders WHERE broadcast_id = ?", id).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// distinctAccepted counts the seeded tokens (one per user) the emulator
// accepted at least once.
func (e *procEnv) distinctAccepted() int64 {
	var n int64
	for uid := 1; uid <= e.n; uid++ {
		if e.emu.Counts(demo.SeedTokenName(uint64(uid), 1, false)).Accepted > 0 {
			n++
		}
	}
	return n
}

// A holder paused past its lease, its chunks taken over by a second
// instance, which is paused in turn just after its claims; the first
// resumes (fenced off: its sends are stored aside), the broadcast is
// canceled while the second's leases are still live, and the second
// resumes, sees the cancel and closes its chunks. The first holder had
// delivered targets the second had not sent again: the close must count
// them as sent, so that succeeded is the emulator's distinct accepted
// targets. Without the fenced holders' sends they stayed canceled (the
// chaos soak's finding 5).
func TestFencedHoldersSendsCountAfterItsSuccessorCancels(t *testing.T) {
	const n = 60000
	e := newProcEnv(t, n, fcmemu.Config{})
	e.env = append(e.env, "PUSHFAN_SEND_TIMEOUT=60s")
	a := e.start("first")
	b := e.submit(a)
	e.waitAccepted(0.2)
	stopped := map[*proc]bool{}
	signal := func(p *proc, sig syscall.Signal) {
		t.Helper()
		if err := p.Cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		stopped[p] = sig == syscall.SIGSTOP
	}
	t.Cleanup(func() {
		for p, s := range stopped {
			if s {
				_ = p.Cmd.Process.Signal(syscall.SIGCONT)
			}
		}
	})
	signal(a, syscall.SIGSTOP)
	time.Sleep(e.cfg.Engine.Lease + time.Second)
	second := e.start("second")
	waitCount(t, e, "the second instance's takeover of a chunk", 30*time.Second,
		"SELECT COUNT(*) FROM broadcast_chunks WHERE broadcast_id = ? AND lease_owner = 'second' AND takeovers > 0", b.ID)
	signal(second, syscall.SIGSTOP)
	signal(a, syscall.SIGCONT)
	waitCount(t, e, "the first instance's sends stored aside", 30*time.Second,
		"SELECT COUNT(*) FROM fenced_sends WHERE broadcast_id = ?", b.ID)
	leases := lease.New(e.pool.DB, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := leases.Stop(ctx, b.ID, ""); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	signal(second, syscall.SIGCONT)
	deadline := time.Now().Add(time.Minute)
	var final countsRow
	for last, quiet := (countsRow{}), time.Now(); ; time.Sleep(100 * time.Millisecond) {
		final = e.row(b.ID)
		if final != last {
			last, quiet = final, time.Now()
		}
		if final.status == "canceled" && time.Since(quiet) > 3*time.Second {
			break // final, and no late report for 3 s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 1m waiting for the broadcast to be canceled and its counts to settle: %+v", final)
		}
	}
	got := e.distinctAccepted()
	if final.succeeded != got || final.failed != 0 || final.succeeded+final.canceled != final.targeted || final.targeted != n {
		t.Fatalf("final %+v; want succeeded = the %d distinct targets the emulator accepted, and the counts adding up to %d", final, got, n)
	}
	var closes int
	if err := e.pool.QueryRow("SELECT COUNT(*) FROM late_holders WHERE broadcast_id = ? AND unsent IS NOT NULL", b.ID).Scan(&closes); err != nil {
		t.Fatal(err)
	}
	if closes == 0 {
		t.Fatal("no chunk a takeover changed hands was closed by the cancel: the drill did not reach the case it is for")
	}
	t.Logf("final %+v = distinct accepted; %d taken-over chunks closed by the cancel", final, closes)
}

// waitCount waits until query (with args) counts at least one row, failing
// after limit with what it waited for.
func waitCount(t *testing.T, e *procEnv, what string, limit time.Duration, query string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var n int
		if err := e.pool.QueryRow(query, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
