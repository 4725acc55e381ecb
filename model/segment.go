package model

import (
	"encoding/json"
	"time"
)

// Segment is a saved segment (issue 42, docs/segments.md): a name, and its
// current version's description and filter. CreatedAt is when its first
// version was written, UpdatedAt and CreatedBy its current version's.
// Versions are listed by one segment's read, oldest first; a list of
// segments leaves them (and the filter) out.
type Segment struct {
	Name        string           `json:"name"`
	Version     int              `json:"version"`
	Description string           `json:"description"`
	Filter      json.RawMessage  `json:"filter,omitempty"`
	CreatedAt   time.Time        `json:"created_at"`
	UpdatedAt   time.Time        `json:"updated_at"`
	CreatedBy   string           `json:"created_by,omitempty"`
	Versions    []SegmentVersion `json:"versions,omitempty"`
}

// SegmentVersion is one version of a segment, never changed once written:
// what a broadcast sent to it was sent to. Filter is left out of a
// segment's list of versions.
type SegmentVersion struct {
	Version     int             `json:"version"`
	Description string          `json:"description"`
	Filter      json.RawMessage `json:"filter,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	CreatedBy   string          `json:"created_by,omitempty"`
}
