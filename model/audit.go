package model

import (
	"encoding/json"
	"time"
)

// AuditEntry is one line of the audit trail: who did what to what, from
// where. Entries are appended, never updated or deleted by the API.
type AuditEntry struct {
	ID    uint64    `json:"id"`
	At    time.Time `json:"at"`
	Actor Actor     `json:"actor"`
	// Action is named noun.verb ("broadcast.create", "key.revoke") or a
	// single word ("testsend", "signin", "signin.failed").
	Action string `json:"action"`
	// Target is what was acted on, "kind:id" ("broadcast:42",
	// "segment:ios-new"); "" when nothing in particular.
	Target    string          `json:"target"`
	IP        string          `json:"ip"`
	RequestID string          `json:"request_id"`
	Detail    json.RawMessage `json:"detail,omitempty"`
}
