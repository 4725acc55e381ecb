// Package consent is the bundled consent table's book (docs/consent.md,
// "The consent table"): each user's answer for each category whose
// consent is `table` (user_consents), every answer kept as proof
// (user_consent_history), and the consents due for reconfirmation.
//
// A Set writes the current answer and appends it to the history in one
// transaction: the proof never misses an answer the table shows, nor
// shows one it never took. Each PUT restarts the two years of the
// reconfirmation (updated_at), even with the same answer; changed_at
// moves only when granted or night does.
//
// The planner reads the same table by its primary key (user_id,
// category) in the audience's one pass; this package only writes and
// lists it, and knows nothing of broadcasts or HTTP. Refusals are
// *FieldError values naming the request field at fault.
package consent
