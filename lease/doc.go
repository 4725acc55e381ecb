// Package lease is pushfan's chunk protocol: how the instances of a
// cluster share a broadcast's work through MySQL without losing a target or
// counting one twice, whatever the network or a deploy does.
//
// A broadcast's audience is planned into chunks: keyset ranges (Lo, Hi]
// of its cursor (the token id for the built-in audiences), or, where the
// plan fixed each target's send time (local time, quiet hours), the list
// of the targets due at one instant. Every chunk knows its target count
// from the plan. A plan is stored in steps (ClaimPlan, CommitStep), by any
// instance, under a lease fenced like a chunk's, so that a submit answers
// at once however large the audience, sending starts with the first
// chunks, and a takeover resumes a plan from its cursor. A chunk row moves
//
//	planning ──(complete)──▶ waiting ──PromoteWaiting──▶ pending ──Claim──▶ leased ──Checkpoint(End: Done)──▶ done
//	                    └───────────(due now)──────────────▲         ▲          │ │
//	                                                                  └Release/HandBack┘ └─(canceled: the rest counted)──┘
//
// and Stop closes every chunk nobody runs straight to done, counting its
// targets without an outcome canceled from the plan's count. The broadcast
// row counts its open chunks, so the last chunk to reach done sees it is
// the last without reading the others, and Finish ends the broadcast,
// folding its chunk rows into a summary on the broadcast row.
//
// A broadcast row's status and counters are this package's alone: no
// other package writes them (package repository inserts the row for
// Submit and Create, and reads it). Its states, and who moves it:
//
//	from                       to                           by
//	(new)                      planning, queued,            Submit (queued when the submit planned it whole,
//	                           scheduled, held                a short user_ids list; scheduled with a start
//	                                                          ahead; held waiting for a release)
//	(new)                      as given                     Create (an import, or a test's fixture: no plan)
//	scheduled                  planning                     PromoteDue (its start has come)
//	held                       planning, scheduled          ReleaseHeld (scheduled: its start is still ahead)
//	held                       canceled                     ExpireHolds (nobody released it in time)
//	scheduled, held            (same: message, send_at)     EditUnstarted (unreleased only)
//	scheduled, held            canceled, failed             Stop (no chunks yet: final at once)
//	planning                   queued                       CommitStep (the plan's last step)
//	planning, queued           running                      Claim (a chunk claimed)
//	planning, queued, running  (flagged)                    Stop: the cancel flag and the error, which every
//	                                                          running chunk sees; the idle chunks closed
//	planning, queued, running  completed, canceled, failed  Finish (planned, every chunk done: canceled if
//	                                                          flagged, failed with an error); Repair (the same,
//	                                                          every chunk row done while open_chunks says not)
//	completed, canceled,       -                            final: Stop answers ErrFinished (a cancel
//	failed                                                    repeated on a canceled one is a no-op)
//
// Any other call leaves the row as it is: ReleaseHeld answers ErrNotHeld,
// the sweeps (PromoteDue, ExpireHolds) select only their status, Finish
// ends nothing that is not planned or has open chunks
// (TestBroadcastTransitionsFollowTheStateMachine walks every pair).
//
// Three rules make it exact:
//
//   - Fencing. Every claim adds one to the chunk's epoch, and so does a
//     Stop that closes a chunk someone may still hold. Every checkpoint,
//     release, hand-back and finish of the chunk names the epoch it was
//     claimed with and changes nothing when the row has moved on (ErrLost).
//     So a holder that stalled past its lease, or a second process wrongly
//     started under the same instance id, cannot store anything once
//     another claim happened. An expired lease that nobody took is still
//     its holder's: its next checkpoint renews it. One fenced holder is
//     still heard: one whose chunk a cancel closed (not a claim) while
//     its lease was expired. The close counted the chunk's unstored
//     targets canceled, but the holder did send some of them; the close
//     keeps its epoch and checkpoint sequence (late_holders), and the
//     holder's checkpoints store their outcomes, moved out of canceled,
//     sequenced as usual, until its last one. Nobody else can count those
//     targets (a closed chunk is never claimed again), so none counts
//     twice. A holder fenced by a takeover stores nothing as the chunk's
//     (its successor sends its unstored targets again and counts them),
//     but its sends are stored aside, target by target, and a cancel that
//     closes the chunk before the successor sent them again counts them as
//     sent, not canceled, each once (fenced.go).
//   - Idempotent commits. When the connection drops after the server
//     applied a COMMIT but before its answer arrived, the caller sees an
//     error although the transaction happened. Each checkpoint carries a
//     sequence number; the row stores the last one applied, so retrying
//     the same checkpoint (the caller must retry exactly the same content
//     before folding in anything new) is recognised and adds nothing twice.
//     Claim and Finish carry a random token for the same purpose, and a
//     Stop applied twice is the same as once.
//   - A checkpoint stores every outcome the run has, not just a contiguous
//     prefix: the cursor (every target at or below it has an outcome) plus
//     the Ranges above it whose targets have one too. A takeover resumes at
//     the cursor and skips the ranges, so after a crash only the sends in
//     flight and those since the last checkpoint are repeated.
//
// Two more rules keep it whole when releases run side by side (a rolling
// deploy across a migration; docs/operations.md, "Upgrades"):
//
//   - The schema fence. Every transaction that moves a chunk or a
//     broadcast on (a claim, a chunk's end, Finish, Repair, Stop, a plan
//     step or claim, a promotion, a release of a held broadcast, a submit)
//     first reads the fence row (schema_fence) under a shared lock. A
//     release that is about to migrate the database raises the fence to
//     the schema it was built for (repository.RaiseFence, which waits for
//     those locks), and a Store whose schema is older then answers
//     ErrOutdated and moves nothing on. It still stores what it sent: its
//     checkpoints are stored (a Done one as a Release, Result.Outdated),
//     and hand-backs and plan releases go through (a plan released so
//     counts no failed attempt). Those writes are the one thing a
//     migration must keep valid for the release before it (expand only).
//     OnOutdated tells the instance, which stops taking work.
//   - Repair. A broadcast whose chunk rows are all done is finished,
//     whatever its open_chunks counter says: a release from before the
//     counter (migration 00014) ends chunks without keeping it, and the
//     counter then never reaches 0. Stranded finds such broadcasts (a loose
//     index scan: two index entries per unfinished broadcast) and Repair
//     finishes them as Finish does, under the same locks, so two instances
//     repair one broadcast once.
//
// The package writes the chunk rows and a broadcast's state (status,
// counters, per-code error counts, cancel flag, plan lease; its users
// counted beside the plan, users_targeted: CommitStep, SetUsersTargeted). Capped targets
// (withheld by a frequency cap) are an outcome like the others: a
// checkpoint adds them to the broadcast's capped, and succeeded + failed +
// canceled + capped is what the chunk has committed. What a checkpoint
// carries beyond counters (failure rows, dead tokens, the frequency-cap
// reservations it settles: package caps) is written by the caller's
// Effects inside the same transaction, so a reservation is released
// exactly when the outcome that frees it is stored, and never twice.
package lease
