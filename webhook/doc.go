// Package webhook tells the app what happened, as Standard Webhooks
// (standardwebhooks.com): every event is written to an outbox in the same
// transaction as the state change that causes it (by package lease, the
// owner of broadcasts' states), and any instance delivers the outbox at
// least once, signed, with the same webhook-id on every attempt.
//
//   - sign.go: the signature scheme (whsec_ secrets, v1 HMAC-SHA256);
//   - endpoint.go: the endpoints of the YAML config, compiled;
//   - client.go: the HTTP client, which refuses private addresses at
//     connect time unless allowed, and follows no redirect;
//   - outbox.go: the events' writer, in the caller's transaction;
//   - deliver.go: the deliverer's loop (slots per endpoint, Stop);
//   - claim.go: one attempt's claim (token and lease), and its hand-back;
//   - record.go: the attempt, and its result written only under its claim;
//   - status.go: the endpoints' health and deliveries, for operators;
//   - summaries.go, summary_pass.go, summary_retry.go: broadcast.engagement,
//     each stage passed from a cursor by one instance at a time.
package webhook
