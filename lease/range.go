package lease

import "pushfan/lease/codec"

// Range is the inclusive span [Lo, Hi] of target cursors (codec.Range):
// in a checkpoint, every target the chunk read with a cursor in the span
// has its outcome stored.
type Range = codec.Range
