// Package chaos is pushfan's chaos soak (make chaos, issue 29): three real
// `pushfan serve` processes behind a TCP fault proxy to one MariaDB
// database, two apps (Firebase projects: the default one and a partner
// app, their tokens interleaved in one device_tokens table), each with an
// FCM emulator of its own in the test process whose quota equals the app's
// rate limit, a load generator keeping a mix of broadcasts going, faults
// injected at random (kill -9, SIGSTOP longer than the lease, database
// cuts and outages, 429 storms, latency spikes, UNAVAILABLE bursts, a
// webhook receiver going away), and an invariant checker reading the
// database, the API and the emulator's arrivals, continuously and once
// more after the run has drained.
//
// It is one test, TestChaosSoak, which runs only when CHAOS_DURATION is
// set (make chaos sets it); CHAOS_SEED replays a run's random choices of
// load and faults (the machine's timing still differs). Everything lives in
// _test.go files: nothing here is linked into a binary.
package chaos
