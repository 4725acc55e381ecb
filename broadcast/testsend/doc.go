// Package testsend makes test sends (POST /push/test, and a stored
// broadcast's rehearsal): an operator checking a message on a few devices
// before a campaign. A test send goes now, while the caller waits, and
// answers per token. It is not a broadcast: no row, no chunks, nothing in
// the stats. It is a real send all the same: its message keeps a
// broadcast's rules (package rules), it spends the FCM budget like any
// (see fanout.Engine.SendNow), and the dead tokens it finds are
// invalidated, as a broadcast's are.
package testsend
