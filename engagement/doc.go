// Package engagement is what happens after FCM accepted a send: every
// message carries data["pushfan"], a compact event token signed with
// HMAC-SHA256 (token.go) that names the broadcast, the target, the
// variants sent and the target's platform, and never the FCM token; the
// app posts it back with an event type (received, opened, clicked,
// dismissed) to POST /v1/events, and the Ingester (ingest.go) verifies
// the events and stores them by group commit. Counts are distinct
// targets per event type per broadcast (also per platform, from the
// token's), so a replay is a duplicate.
package engagement
