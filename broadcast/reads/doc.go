// Package reads answers what is stored of the broadcasts, for the API and
// the webhooks' summaries: a broadcast (Get, and Peek through a cache a
// quarter second deep, for the consoles polling a running one), lists,
// totals, failures, engagement, a job's last fire, an audience's preview
// (a count, a sample, the users its cap would withhold), and Wait, which
// polls a broadcast until it ends or cannot end by the caller's deadline.
//
// It writes nothing. The write side (package broadcast) reads through it
// too, and tells it which broadcasts it changed (Reader.Forget), so that
// no cache answers a row older than this instance's own change.
package reads
