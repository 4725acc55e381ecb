// Package caps is the frequency-cap ledger: how many broadcasts each user
// was sent per window, reserved before the send so that broadcasts racing
// over the same users never give one more than the cap.
//
// A cap of N per window is N slots per user (frequency_slots, keyed by
// user, window and slot). A send holds one slot of every cap of its
// broadcast until the slot expires: the end of the user's local calendar
// day for a daily cap (the user's zone, else the default zone), the time
// of the reservation plus the window for a rolling one. An expired slot is
// free again, so the table holds at most N rows per user and window, and
// the caps of different broadcasts over one window read the same slots
// (a 1/day and a 3/day broadcast both count the day's sends).
//
// The unit is the user: each user's answer in a broadcast is stored once
// (frequency_users, keyed by the broadcast, a resend's by itself) and
// every device of theirs, whatever page or chunk reads it, gets the same
// one. Its states:
//
//	(none) ──Reserve──▶ reserved ──checkpoint: a device sent──▶ sent
//	   │                   └──checkpoint: only unsent outcomes, no target held──▶ released ──Reserve (a later device)──▶ …
//	   └────Reserve (a cap full)──▶ capped
//
// Reserve runs once per page of targets, before any of them is handed to
// the workers: a handful of statements per page, each over the page's
// users, never one per target. It first records the page's targets as
// holding their users' answers (frequency_holds, per chunk run: the
// targets read and not yet settled), then reads the answers. A slot is taken with a conditional upsert
// (the row is rewritten only when expired), then read back: two
// broadcasts racing for a user's last slot both write it and exactly one
// reads its own id there; the other goes on to the next free slot, or
// finds none and caps the user. The answer is then written with
// "first one wins" (only an absent or released row is overwritten) and
// read back, so two chunks of one broadcast racing over one user's devices
// agree; a user whose answer is capped drops the slots it took.
//
// Settle runs inside a chunk's checkpoint transaction (package lease
// calls it through the checkpoint's effects): users with a device sent in
// it become sent; the settled targets hold their answers no longer; users
// whose devices in it all ended unsent (canceled, failed for good, a dead
// token), none sent before, and no target of theirs held still in any
// chunk, are released, their slots deleted, in the same transaction as
// the outcomes. A replayed checkpoint runs nothing again.
//
// A crash between Reserve and the send leaves the user reserved. The
// takeover reads the page again, finds the answer and sends (the send may
// repeat one that happened, within the run's at-least-once bound, and only
// to a user this broadcast holds a slot for). A user is never both capped
// and unsent for one slot: a capped user holds none, and a reserved one's
// slot is released at the checkpoint that stores its unsent outcomes.
//
// The holds are what keep a user under the cap when one device fails for
// good while another, reserved under the same answer, is in flight (in
// another chunk, or later in the same one): the release waits for the
// checkpoint that settles the last held target, so no racing broadcast
// can take the slot before the in-flight send is stored. A reservation
// and a release take turns: Reserve locks the answers (shared) before it
// writes the holds, Settle locks them (exclusive) before it reads the
// holds' sum, so either the release sees the hold, or the reservation,
// reading the answer after its hold committed, finds it released and
// reserves again. A takeover's claim has a greater epoch: its first hold
// of a user in its chunk replaces the dead run's count (every target that
// run left unsettled is read again by the takeover); a page reserved again
// by one run counts once (holds remember the last cursor counted).
//
// A resend counts as its original (Broadcast): the slots it takes are
// its root's (frequency_slots.broadcast_id is the root of its chain, the
// original a resend of a resend of … went over), so a user the original
// was sent to (on another device) finds the slot held and gets the resend
// without a second one, and a user the original did not reach takes one,
// the root's, once for the original and all its resends; a slot of the
// original's that expired (a rolling window past) is taken anew. Its
// answers and holds are its own, keyed by the resend: retention keeps
// them while it runs whenever its root ended, and two resends of one
// original count their chunks apart. Two resends of one original running
// at once reserve the same users: one takes a user's slot, the other
// finds it held. So a resend gives back only a slot it took (taker), never
// the one the original, or a finished resend, was sent under, and a slot
// another resend of the root still shares goes to that one instead
// (frequency_shares: the users each resend holds under its root's
// slots, written before it reads them; the release reads the root's rows
// of its users with locks, so a resend sharing one meanwhile is either
// seen or reads the slot gone and takes it again).
//
// Retention (Sweep) deletes the slots long expired, and the answers,
// holds and shares of the broadcasts that ended an hour ago. A running
// broadcast writes its rows at every page and checkpoint, so the sweep
// neither reads nor locks one of them: it lists the broadcasts present
// in each table (an index dive each), asks which ended, and deletes their
// rows by whole primary keys, a batch at a time.
//
// A sent user found without its slot (a cap lowered meanwhile, or a run
// sending after its lease was taken over, outside the holds as it is
// outside the lease) takes its slots again at the checkpoint; if another
// broadcast holds them, the user was sent past the cap: Settle reports it
// (Settled.Over), the run logs it and counts it
// (pushfan_frequency_cap_exceeded_total).
package caps
