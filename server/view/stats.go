package view

import "time"

// Stats is GET /push/stats.
type Stats struct {
	Broadcasts        int64            `json:"broadcasts"`
	DryRuns           int64            `json:"dry_runs"`
	Targeted          int64            `json:"targeted"`
	Succeeded         int64            `json:"succeeded"`
	Failed            int64            `json:"failed"`
	Canceled          int64            `json:"canceled"`
	Capped            int64            `json:"capped"`
	InvalidatedTokens int64            `json:"invalidated_tokens"`
	Errors            map[string]int64 `json:"errors"`
	Opened            int64            `json:"opened"`
	Clicked           int64            `json:"clicked"`
}

// Failure is one failed target of a broadcast.
type Failure struct {
	TokenID   uint64    `json:"token_id"`
	UserID    uint64    `json:"user_id"`
	Code      string    `json:"code"`
	Message   string    `json:"message"`
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"created_at"`
}

// FailuresPage is a page of GET /push/broadcasts/{id}/failures.
type FailuresPage struct {
	Failures   []Failure `json:"failures"`
	NextCursor *string   `json:"next_cursor"`
}
