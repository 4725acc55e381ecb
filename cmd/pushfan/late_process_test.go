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
