// Package broadcast owns a broadcast's lifecycle, with MySQL as the
// coordinator so that no work lives only in memory:
//
//   - Submit stores the broadcast and its chunks (keyset ranges of device
//     token ids) in one transaction and returns; the row is "queued".
//   - Every instance runs a dispatcher that claims chunks under a lease
//     (SELECT ... FOR UPDATE SKIP LOCKED), including chunks whose lease
//     expired because their holder died, and runs the fanout engine over
//     each from its checkpointed cursor.
//   - Every FlushInterval a chunk checkpoints: the cursor below which every
//     target has an outcome, and exactly those outcomes' counters, failures
//     and dead tokens, in one transaction that also renews the lease.
//   - The last chunk to finish finishes the broadcast.
//
// A crash loses at most the sends since the last checkpoint plus those in
// flight: they are sent again by whoever resumes the chunk (at-least-once),
// and counted once.
package broadcast
