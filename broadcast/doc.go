// Package broadcast is pushfan's write side: the Service that every entry
// point (the HTTP API, cron jobs) calls to submit, cancel, release, resend
// and fire a job's broadcast, with MySQL as the coordinator so that no
// work lives only in memory. Beside and below it, each with one job:
//
//   - Package rules holds the request rules: Spec, the request's shape,
//     is checked into a Request (message size, reserved data keys,
//     templates, audience binding, send_at); a broken rule is a
//     *rules.FieldError naming the field. A cron job's fire is made a
//     Request by the same rules.
//   - Submit stores the broadcast (a short user_ids list planned inside
//     the submit); the row is "planning", or "scheduled" until starts_at,
//     send_at plus the start spread (promote, startspread.go), or "held"
//     until released (held.go). A job fire is a submit keyed on job and
//     fire time (jobs.go); a resend is a submit over a finished
//     broadcast's failures (resend.go).
//   - Package plan plans the audience into chunks after the answer, on any
//     instance, with local time and quiet hours.
//   - Package run claims and sends the chunks: the dispatcher, the chunk
//     runs and their checkpoints, the store gate, the pacer. The last chunk
//     to end finishes the broadcast; a cancel closes the chunks nobody runs
//     and counts their targets canceled.
//   - Package reads answers what is stored (a broadcast, lists, totals,
//     failures, engagement, previews, waits) with its caches; the Service
//     reads through it and tells it which broadcasts it changed.
//   - Package testsend makes test sends, which store no broadcast.
//
// Package lease owns every status and counter write of the broadcasts and
// their chunks; this package, plan and run ask it.
package broadcast
