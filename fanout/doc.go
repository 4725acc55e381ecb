// Package fanout is pushfan's sending engine. It knows nothing about HTTP
// or broadcasts as rows: it takes a Message, a Source of targets (device
// tokens in keyset order) and a Sender, and sends one message per target
// across a bounded pool of goroutines, counting every outcome exactly.
//
// The shape of one Run:
//
//	producer ──pages──▶ work chan ──▶ N workers ──▶ Sender (one message per token)
//	    ▲                   ▲              │
//	    │ outstanding       └── retry ◀────┘ transient failures wait in a delay
//	    │ semaphore             queue         queue, never in a worker
//
// The work channel and the N workers belong to the Engine and are shared by
// every Run in progress (each item carries its run): one broadcast can use
// every worker, and concurrent Runs never exceed N sends in flight. The
// engine owns the pool: Start starts it, Stop waits for the Runs in
// progress and then for the workers.
//
// The engine knows nothing about HTTP or FCM: a Sender (package fcm)
// prepares each message once and returns a classified Outcome per send.
//
// Memory is bounded by PageSize + Concurrency + the outstanding cap, never by
// the audience size. Every token ends in exactly one of succeeded, failed or
// canceled, and Progress counts it there once.
package fanout
