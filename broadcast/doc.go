// Package broadcast owns a broadcast's lifecycle: it stores the row, runs
// the fanout engine over the audience in MySQL, flushes live counters to the
// row, records failures, invalidates dead tokens, and finishes the row with
// an exact aggregate. The HTTP layer calls it; it knows nothing of HTTP.
package broadcast
