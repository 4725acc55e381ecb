// Package broadcast is pushfan's domain: what every entry point (the HTTP
// API, cron jobs) calls, with MySQL as the coordinator so that no work
// lives only in memory.
//
//   - Rules (spec.go) are the request rules: message size, reserved data
//     keys, templates, audience binding, send_at. A broken one is a
//     *FieldError naming the field.
//   - Submit stores the broadcast and its chunks (planned from the
//     audience's own tokens) in one transaction; the row is "queued", or
//     "scheduled" until starts_at, send_at plus the start spread (promote,
//     startspread.go). A job fire is a submit keyed on job and fire time
//     (jobs.go), scheduled the same way while the spread is on.
//   - Every instance runs a dispatcher that claims chunks (package lease:
//     fenced by an epoch, taking over expired leases) and runs the fanout
//     engine over each from its stored cursor, skipping its done ranges.
//   - Every FlushInterval a chunk checkpoints every outcome it has, in one
//     transaction that also renews the lease; an unconfirmed checkpoint is
//     retried unchanged.
//   - The last chunk to end finishes the broadcast; a cancel closes the
//     chunks nobody runs and counts their targets canceled.
//
// A kill -9 repeats at most the sends in flight and those since the last
// checkpoint (at-least-once), and counts each target once.
package broadcast
