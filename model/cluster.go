package model

import "time"

// Cluster is what the instances sharing one database are doing now: the
// rate budget's members and the chunks under a live lease.
type Cluster struct {
	Limit       float64 // the project's messages per second
	PausedUntil *time.Time
	Members     []BudgetMember
	Chunks      []RunningChunk
	// Truncated: more chunks are running than Chunks lists.
	Truncated bool
}

// BudgetMember is one process in the rate budget.
type BudgetMember struct {
	Instance     string
	Sending      bool
	Demand       float64 // +Inf: as much as it gets
	Share        float64 // its part of Limit, by the members' split
	HeartbeatAge time.Duration
	// SchemaVersion is the schema its release was built for (0: a release
	// from before it was recorded).
	SchemaVersion int64
	Self          bool // the instance that answered
}

// RunningChunk is a leased chunk of a broadcast.
type RunningChunk struct {
	BroadcastID uint64
	Seq         int
	Class       string
	Owner       string
	LeaseUntil  time.Time
	CursorID    uint64
	HiID        uint64
}
