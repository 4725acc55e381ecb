// Package fcmemu is an emulator of the Firebase Cloud Messaging HTTP v1 send API that the real
// firebase Go SDK (firebase.google.com/go/v4) cannot tell from FCM: same routes, same request
// body, same google.rpc.Status error bodies (with the FcmError, ErrorInfo and BadRequest
// details the SDK and clients parse), same Retry-After headers. Tests, benchmarks and the local
// demo point pushfan at it with PUSHFAN_FCM_ENDPOINT=http://ADDR/v1.
//
// # Pointing the SDK at it
//
//	app, _ := firebase.NewApp(ctx, &firebase.Config{ProjectID: "demo-project"},
//		option.WithEndpoint(srv.URL+"/v1"), option.WithoutAuthentication())
//	client, _ := app.Messaging(ctx)
//
// Any project id is accepted. To use a tuned transport (h2c, TLS with the emulator's CA), add
// option.WithHTTPClient(hc); the endpoint option still applies.
//
// # Routes
//
//	POST /v1/projects/{project}/messages:send   the FCM send call (also without /v1)
//	GET  /emulator/counts[?token=T]             per-token counts, streamed
//	GET  /emulator/stats                        totals
//	POST /emulator/reset                        clear counts and stats (not config)
//	GET  /emulator/config                       current Config as JSON
//	PUT  /emulator/config                       change Config at runtime (fields present replace)
//	POST /emulator/devices/{token}/offline      take a token's phone offline: FCM stores its messages
//	POST /emulator/devices/{token}/online       bring it back: {"delivered":[...],"deleted":bool}
//
// # Offline phones
//
// A token taken offline (Offline, or the route above) is a phone away from the network: what FCM
// accepts for it is stored by FCM's rules for an Android device, and Online hands back what was
// kept. A non-collapsible message is kept, up to 100 (the 101st discards them all, and the phone
// is told: deleted); a collapsible one (android.collapse_key) replaces the stored message of its
// key, and at most four keys are kept (the oldest goes); a message whose android.ttl passed is
// dropped, and one with a ttl of 0 is never stored. Shown folds what a phone got by its
// notification tag, as the tray does.
//
// Anything else, a wrong method included, answers 404 NOT_FOUND in the google.rpc.Status JSON
// shape.
//
// # Token prefixes
//
// The outcome for a registration token is chosen by its prefix, so a test states what it expects
// in the data it sends:
//
//	unregistered-…   404 NOT_FOUND,          FcmError UNREGISTERED
//	invalid-…        400 INVALID_ARGUMENT,   FcmError INVALID_ARGUMENT, token cause (see below)
//	mismatch-…       403 PERMISSION_DENIED,  FcmError SENDER_ID_MISMATCH
//	quota-…          429 RESOURCE_EXHAUSTED, FcmError QUOTA_EXCEEDED, Retry-After: 1
//	unavailable-…    503 UNAVAILABLE,        FcmError UNAVAILABLE (every time; the SDK retries 503
//	                                          four times by itself, so one Send costs 5 attempts)
//	internal-…       500 INTERNAL,           FcmError INTERNAL (every time)
//	auth-…           401 UNAUTHENTICATED,    FcmError THIRD_PARTY_AUTH_ERROR
//	hang-…           no answer until the client gives up (request context done), the server
//	                 shuts down, or Config.HangMax passes; the last two answer 503 UNAVAILABLE
//	flaky<K>x<KIND>-…  the first K requests naming this token fail with KIND, later ones
//	                 succeed; KIND is one of unavailable, internal, quota, unregistered,
//	                 invalid, mismatch, auth, hang (e.g. flaky2xunavailable-a, flaky1xquota-b,
//	                 flaky1xhang-c to exercise a client's per-send timeout and retry).
//	                 "Requests" are counted like the token's attempts count, whatever answered
//	                 them, which makes the outcome deterministic per token.
//
// Any other token succeeds, subject to the storm, the quota and the random error rates of
// Config, checked in that order before the prefix. validate_only requests (SendDryRun) run every
// check and prefix outcome but are counted as validated, not accepted.
//
// # Validation and how a client tells "bad token" from "bad message"
//
// Like FCM, a request is rejected with 400 INVALID_ARGUMENT (FcmError INVALID_ARGUMENT plus a
// google.rpc.BadRequest detail) for: malformed JSON; not exactly one of message.token, topic,
// condition; a malformed topic name; a message payload over 4096 bytes; a reserved data key
// (from, message_type, google.*, gcm.*); a data value that is not a string; a malformed token
// (empty, a character outside [A-Za-z0-9_:.-], or the invalid- prefix).
//
// The payload size is the number of bytes of {"data":...,"notification":...} built from the
// message's data and notification objects as compact JSON (null when absent), followed by
// ,"android":...,"apns":...,"webpush":...,"fcm_options":... for those present (compact, collapse
// keys included): the whole message counts, but its token, topic or condition.
//
// A client tells the causes apart the way it would with FCM: for a token cause the error
// message is "The registration token is not a valid FCM registration token" (it mentions
// "registration token") and the BadRequest fieldViolations name the field "message.token"; for
// every message cause the violation names another field ("message", "message.data",
// "message.topic", ...) and the text does not mention the registration token. The token is dead
// only in the first case.
//
// # Quota, storms and Retry-After
//
// Config.QuotaLimit/QuotaWindow emulate FCM's per-project quota: a fixed window that starts at
// the first request (not aligned to the clock); over the limit a request gets 429 in the
// project-quota shape (google.rpc.ErrorInfo reason RATE_LIMIT_EXCEEDED, no FcmError, so
// messaging.IsQuotaExceeded is false while errorutils.IsResourceExhausted is true) with
// Retry-After = whole seconds until the window refills. Config.StormAfter/StormFor start a
// storm after that many accepted sends: every send during it gets the same project-quota 429
// with Retry-After = seconds left in the storm.
//
// Every 429 tells the client to stay away for Retry-After seconds. The emulator records requests
// that did not (Stats.RequestsDuringBackoff). For a project 429 (quota, storm) that is a request
// for any token arriving after the 429 was sent and before the quota refilled or the storm
// ended: a client honouring the Retry-After (that instant rounded up to whole seconds) cannot
// arrive earlier. Because a concurrent client cannot stop requests already on the wire when the
// first project 429 reaches it, arrivals within Config.BackoffGrace (default 250ms) of a project
// 429 are not counted. For an FcmError QUOTA_EXCEEDED 429 (quota- tokens, flaky quota, random
// QUOTA_EXCEEDED) it is a request for that token arriving before the 429's Retry-After instant.
// A client that honours Retry-After leaves the counter at 0.
//
// # Randomness
//
// Random choices (error rates, jitter) are a hash of (Config.Seed, token, attempt number), not a
// shared random source: no lock on the hot path, and a given seed gives every token's n-th
// attempt the same outcome however requests interleave. A random UNREGISTERED is drawn per token
// (not per attempt), so a token that was unregistered stays unregistered, as in FCM.
package fcmemu
