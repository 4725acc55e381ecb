// Package webhook tells the app what happened, as Standard Webhooks
// (standardwebhooks.com): every event is written to an outbox in the same
// transaction as the state change that causes it (by package lease, the
// owner of broadcasts' states), and any instance delivers the outbox at
// least once, signed, with the same webhook-id on every attempt.
//
//   - sign.go: the signature scheme (whsec_ secrets, v1 HMAC-SHA256);
//   - endpoint.go: the endpoints of the YAML config, compiled;
//   - client.go: the HTTP client, which refuses private addresses at
//     connect time unless allowed, and follows no redirect.
package webhook
