package chaos

import (
	"fmt"
	"slices"
	"time"
)

// capSlack is how much earlier than the emulator's arrival a send's
// frequency-cap slot may have been taken: the ledger counts a user's
// window from the reservation, made for a page of targets before any of
// them is sent, and the page is sent behind the other broadcasts at the
// rate limit, or, through a fault, after a pause past the lease or a
// database restart. The check counts a user's capped broadcasts in
// windows of the cap's length less this slack (docs/reliability-soak.md,
// "Frequency caps").
const capSlack = 30 * time.Second

// capResult is what the cap checks found, for the report.
type capResult struct {
	broadcasts int
	capped     int64
	users      int // users sent at least one capped broadcast
	// mostInWindow is the most capped broadcasts one user was sent
	// within any chaosCapWindow (by arrival); withinSlack counts the
	// users over the cap in such a window, explained by capSlack.
	mostInWindow, withinSlack int
	splitDevices              int // two-device users with one device sent and the other failed
}

// checkCaps checks the capped broadcasts against the emulator: no user
// got more than the cap in any window (less capSlack), a user the ledger
// capped got nothing, and a user's two devices got the same answer.
func checkCaps(s *stack, r *run) capResult {
	var res capResult
	type bc struct {
		ID     uint64 `db:"id"`
		Status string `db:"status"`
		Capped int64  `db:"capped"`
	}
	var bcs []bc
	if err := s.db.Select(&bcs, "SELECT id, status, capped FROM broadcasts WHERE frequency_cap IS NOT NULL"); err != nil {
		r.violate(0, fmt.Sprintf("caps: reading the capped broadcasts: %v", err))
		return res
	}
	sends := s.cappedSends()
	byUser := map[uint64][]time.Time{}
	for _, b := range bcs {
		res.broadcasts++
		res.capped += b.Capped
		for u, x := range sends[b.ID] {
			byUser[u] = append(byUser[u], x.first)
		}
		// The ledger's capped users got nothing of this broadcast.
		var capped []uint64
		if err := s.db.Select(&capped, "SELECT user_id FROM frequency_users WHERE broadcast_id = ? AND state = 2", b.ID); err != nil {
			r.violate(b.ID, fmt.Sprintf("caps: reading the ledger's answers: %v", err))
			return res
		}
		for _, u := range capped {
			if x, ok := sends[b.ID][u]; ok {
				r.violate(b.ID, fmt.Sprintf("user %d is capped in the ledger, but the emulator accepted %d of their devices", u, x.devices))
				return res
			}
		}
		if b.Status != "completed" {
			continue
		}
		// A completed broadcast sent a user's two devices both or neither,
		// unless one failed.
		for u, x := range sends[b.ID] {
			if u%10 != 0 || x.devices == 2 {
				continue
			}
			var failed int
			if err := s.db.QueryRow("SELECT COUNT(*) FROM broadcast_failures WHERE broadcast_id = ? AND user_id = ?", b.ID, u).Scan(&failed); err != nil {
				r.violate(b.ID, fmt.Sprintf("caps: reading failures: %v", err))
				return res
			}
			if failed == 0 {
				r.violate(b.ID, fmt.Sprintf("user %d has two devices; the emulator accepted %d and neither failed", u, x.devices))
				return res
			}
			res.splitDevices++
		}
	}
	res.users = len(byUser)
	for u, ts := range byUser {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		over := false
		for i := range ts {
			in := 1
			for j := i + 1; j < len(ts) && ts[j].Sub(ts[i]) < chaosCapWindow; j++ {
				in++
				if ts[j].Sub(ts[i]) < chaosCapWindow-capSlack && in > chaosCapN {
					r.violate(0, fmt.Sprintf("user %d was sent %d capped broadcasts within %v (at %s and %s): over the cap %s beyond the slack %v",
						u, in, ts[j].Sub(ts[i]).Round(time.Millisecond), ts[i].Sub(r.t0).Round(time.Millisecond), ts[j].Sub(r.t0).Round(time.Millisecond), chaosCap, capSlack))
					return res
				}
			}
			res.mostInWindow = max(res.mostInWindow, in)
			over = over || in > chaosCapN
		}
		if over {
			res.withinSlack++
		}
	}
	return res
}
