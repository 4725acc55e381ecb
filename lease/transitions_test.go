package lease_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/model"
)

// Every status meets every call that moves a broadcast row outside a
// chunk's run, and ends where the package doc's table says: the listed
// transitions happen, and any other call leaves the row as it was.
// ("Stop+Finish" is a cancel flagged then finished.) Claim and CommitStep,
// which need chunks and a plan, are walked by the claim and plan tests.
func TestBroadcastTransitionsFollowTheStateMachine(t *testing.T) {
	t.Parallel()
	tdb := testdb.New(t)
	s, leases := tdb.Store, lease.New(tdb.SQL.DB, nil)
	past := time.Now().Add(-time.Minute).UTC()
	ops := map[string]func(id uint64) error{
		"PromoteDue": func(uint64) error { _, err := leases.PromoteDue(ctx(t)); return err },
		"ReleaseHeld": func(id uint64) error {
			_, err := leases.ReleaseHeld(ctx(t), id, model.Actor{Kind: model.ActorToken, ID: "ops", Name: "ops"})
			if errors.Is(err, lease.ErrNotHeld) {
				return nil // refused, as the table says for anything not held
			}
			return err
		},
		"ExpireHolds": func(uint64) error { _, err := leases.ExpireHolds(ctx(t)); return err },
		"Stop":        func(id uint64) error { return stop(t, leases, id, "") },
		"StopFail":    func(id uint64) error { return stop(t, leases, id, "boom") },
		"Finish":      func(id uint64) error { _, err := leases.Finish(ctx(t), id); return err },
		// A counter that says a chunk is open with none left (a release
		// without the counter ended it).
		"Repair": func(id uint64) error {
			if _, err := tdb.SQL.ExecContext(ctx(t), "UPDATE broadcasts SET open_chunks = 1 WHERE id = ?", id); err != nil {
				return err
			}
			_, _, err := leases.Repair(ctx(t), id)
			return err
		},
		"Stop+Finish": func(id uint64) error {
			if err := stop(t, leases, id, ""); err != nil {
				return err
			}
			_, err := leases.Finish(ctx(t), id)
			return err
		},
		"StopFail+Finish": func(id uint64) error {
			if err := stop(t, leases, id, "boom"); err != nil {
				return err
			}
			_, err := leases.Finish(ctx(t), id)
			return err
		},
	}
	const same = "" // the row is left as it was
	// want[from][op]: the status after op ("flagged": unchanged status,
	// the cancel flag set).
	want := map[model.Status]map[string]string{
		model.StatusScheduled: {"PromoteDue": "planning", "Stop": "canceled", "StopFail": "failed", "Stop+Finish": "canceled", "StopFail+Finish": "failed"},
		model.StatusHeld:      {"ReleaseHeld": "planning", "ExpireHolds": "canceled", "Stop": "canceled", "StopFail": "failed", "Stop+Finish": "canceled", "StopFail+Finish": "failed"},
		model.StatusPlanning:  {"Stop": "flagged", "StopFail": "flagged", "Stop+Finish": "canceled", "StopFail+Finish": "failed"},
		model.StatusQueued:    {"Stop": "flagged", "StopFail": "flagged", "Finish": "completed", "Repair": "completed", "Stop+Finish": "canceled", "StopFail+Finish": "failed"},
		model.StatusRunning:   {"Stop": "flagged", "StopFail": "flagged", "Finish": "completed", "Repair": "completed", "Stop+Finish": "canceled", "StopFail+Finish": "failed"},
		model.StatusCompleted: {},
		model.StatusCanceled:  {},
		model.StatusFailed:    {},
	}
	for from, row := range want {
		for op, call := range ops {
			t.Run(fmt.Sprintf("%s/%s", from, op), func(t *testing.T) {
				b := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "t"}, Audience: model.Audience{All: true}}, Status: from}
				switch from {
				case model.StatusScheduled:
					b.SendAt = &past
				case model.StatusHeld:
					b.HoldExpiresAt = &past
				}
				if err := leases.Create(ctx(t), b); err != nil {
					t.Fatal(err)
				}
				if err := call(b.ID); err != nil {
					t.Fatalf("%s on a %s broadcast: %v", op, from, err)
				}
				got, err := s.GetBroadcast(ctx(t), b.ID)
				if err != nil {
					t.Fatal(err)
				}
				to := row[op]
				switch to {
				case same:
					if got.Status != from || got.CancelRequested {
						t.Fatalf("%s moved a %s broadcast to %s (cancel requested %v): the table lists no such transition", op, from, got.Status, got.CancelRequested)
					}
				case "flagged":
					if got.Status != from || !got.CancelRequested {
						t.Fatalf("%s on a %s broadcast: %s, cancel requested %v; want it flagged, still %s", op, from, got.Status, got.CancelRequested, from)
					}
				default:
					if string(got.Status) != to {
						t.Fatalf("%s moved a %s broadcast to %s, want %s", op, from, got.Status, to)
					}
				}
			})
		}
	}
}

// stop is Stop, where ErrFinished is the table's refusal of a final row.
func stop(t *testing.T, leases *lease.Store, id uint64, reason string) error {
	_, err := leases.Stop(ctx(t), id, reason)
	if errors.Is(err, lease.ErrFinished) {
		return nil
	}
	return err
}
