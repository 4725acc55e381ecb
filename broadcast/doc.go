// Package broadcast is pushfan's domain entry point: the Service that
// every entry point (the HTTP API, cron jobs) calls, with MySQL as the
// coordinator so that no work lives only in memory. It is a thin facade
// over rooms of its own:
//
//   - Rules (spec.go) are the request rules: message size, reserved data
//     keys, templates, audience binding, send_at. A broken one is a
//     *FieldError naming the field. The message itself (overrides,
//     localized variants, templates) is package broadcast/message.
//   - Submit stores the broadcast (a short user_ids list planned inside
//     the submit); the row is "planning", or "scheduled" until starts_at,
//     send_at plus the start spread (promote, startspread.go), or "held"
//     until released (held.go). A job fire is a submit keyed on job and
//     fire time (jobs.go).
//   - Package plan plans the audience into chunks after the answer, on any
//     instance, with local time and quiet hours.
//   - Package run claims and sends the chunks: the dispatcher, the chunk
//     runs and their checkpoints, the store gate, the pacer. The last chunk
//     to end finishes the broadcast; a cancel closes the chunks nobody runs
//     and counts their targets canceled.
//   - Operations on stored broadcasts: held (release), resend of the
//     failures, test sends, previews, reads.
//
// Package lease owns every status and counter write of the broadcasts and
// their chunks; this package and its rooms ask it.
package broadcast
