// Package audit is the audit trail's domain: which action each mutating
// route records (the one table, actions.go), the entry a request will
// record (pending, carried by its context), and the entries' storage.
//
// The rule is that no change is stored without its entry. A request's
// entry is built before its handler runs (who, from where, what) and put
// in its context; the domain code that stores the change calls Write in
// that change's own transaction, so the entry commits, or rolls back,
// with the change. Only the transaction that calls Write carries the
// entry: a request's earlier or later transactions (an idempotency
// look-up, a segment read, a plan step) carry nothing, and a transaction
// run on a context with no pending entry (a cron fire's own, a planner's)
// writes nothing. A route whose change touches no table (a test send, a
// reload) records its entry after a successful answer, in a transaction
// of its own (Store.Record).
//
// Entries are appended only: the API never updates or deletes one;
// retention deletes those older than PUSHFAN_AUDIT_RETENTION.
package audit
