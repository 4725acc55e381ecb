// Package codec holds the compact encodings of a chunk row's columns:
// the done ranges of a checkpoint (cursor-relative uvarint gaps and
// lengths), a chunk's target list (uvarint gaps from its lower bound),
// and a set of ranges with no cursor below it (a fenced holder's unsent
// targets).
// They are the storage format of package lease's protocol, apart from its
// SQL so that they can be read and tested on their own.
package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Range is the inclusive span [Lo, Hi] of target cursors. In a checkpoint
// it says: every target the chunk read with a cursor in the span has its
// outcome stored. Ranges are built from runs of consecutive targets in read
// order, so a cursor inside a range that is not a target (a gap in the ids)
// simply never was one.
type Range struct{ Lo, Hi uint64 }

// maxRanges bounds a decoded set. A run writes at most one range per target
// it holds without an outcome (plus one), and the engine caps those, so a
// stored set far beyond this is corrupt rather than large.
const maxRanges = 1 << 20

// EncodeRanges writes rs (sorted, disjoint, all above cursor) relative to
// cursor as uvarints: the count, then per range the gap from the previous
// end (the cursor first) and its length. Dense token ids make both small:
// a few bytes per range.
func EncodeRanges(cursor uint64, rs []Range) ([]byte, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	buf := make([]byte, 0, 1+len(rs)*6)
	buf = binary.AppendUvarint(buf, uint64(len(rs)))
	prev := cursor
	for _, r := range rs {
		if r.Lo <= prev || r.Hi < r.Lo {
			return nil, fmt.Errorf("range [%d, %d] does not follow %d: ranges must be sorted, disjoint and above the cursor", r.Lo, r.Hi, prev)
		}
		buf = binary.AppendUvarint(buf, r.Lo-prev)
		buf = binary.AppendUvarint(buf, r.Hi-r.Lo)
		prev = r.Hi
	}
	return buf, nil
}

// DecodeRanges is the inverse of EncodeRanges.
func DecodeRanges(cursor uint64, b []byte) ([]Range, error) {
	if len(b) == 0 {
		return nil, nil
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxRanges {
		return nil, errors.New("done ranges: bad count")
	}
	b = b[k:]
	out := make([]Range, 0, n)
	prev := cursor
	for range n {
		gap, k1 := binary.Uvarint(b)
		if k1 <= 0 {
			return nil, errors.New("done ranges: truncated")
		}
		length, k2 := binary.Uvarint(b[k1:])
		if k2 <= 0 {
			return nil, errors.New("done ranges: truncated")
		}
		b = b[k1+k2:]
		lo := prev + gap
		if gap == 0 || lo < prev || lo+length < lo {
			return nil, errors.New("done ranges: out of order or overflowing")
		}
		out = append(out, Range{Lo: lo, Hi: lo + length})
		prev = lo + length
	}
	if len(b) != 0 {
		return nil, errors.New("done ranges: trailing bytes")
	}
	return out, nil
}

// maxIDs bounds a decoded target list: a chunk holds at most
// PUSHFAN_CHUNK_WIDTH targets (10,000 by default), so a list far beyond
// this is corrupt rather than large.
const maxIDs = 1 << 24

// EncodeIDs writes a chunk's target ids (ascending, all above lo) as
// uvarint gaps from lo: one or two bytes per target for dense token ids,
// so a 10,000-target chunk stores about 10-20 KB.
func EncodeIDs(lo uint64, ids []uint64) ([]byte, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	buf := make([]byte, 0, len(ids)*2)
	prev := lo
	for _, id := range ids {
		if id <= prev {
			return nil, fmt.Errorf("target %d does not follow %d: target ids must be ascending and above the chunk's lower bound", id, prev)
		}
		buf = binary.AppendUvarint(buf, id-prev)
		prev = id
	}
	return buf, nil
}

// DecodeIDs is the inverse of EncodeIDs; nil for a chunk without a list.
func DecodeIDs(lo uint64, b []byte) ([]uint64, error) {
	if len(b) == 0 {
		return nil, nil
	}
	out := make([]uint64, 0, len(b))
	prev := lo
	for len(b) > 0 {
		gap, k := binary.Uvarint(b)
		if k <= 0 || gap == 0 || prev+gap < prev || len(out) == maxIDs {
			return nil, errors.New("target ids: corrupt list")
		}
		prev += gap
		out = append(out, prev)
		b = b[k:]
	}
	return out, nil
}

// EncodeSet writes a set of ranges with no cursor below it: the first
// range's bounds, then the rest as EncodeRanges after it.
func EncodeSet(rs []Range) ([]byte, error) {
	if len(rs) == 0 {
		return []byte{}, nil
	}
	head := binary.AppendUvarint(nil, rs[0].Lo)
	head = binary.AppendUvarint(head, rs[0].Hi-rs[0].Lo)
	tail, err := EncodeRanges(rs[0].Hi, rs[1:])
	if err != nil {
		return nil, err
	}
	return append(head, tail...), nil
}

// DecodeSet is the inverse of EncodeSet.
func DecodeSet(b []byte) ([]Range, error) {
	if len(b) == 0 {
		return nil, nil
	}
	lo, k1 := binary.Uvarint(b)
	if k1 <= 0 {
		return nil, errors.New("unsent ranges: truncated")
	}
	length, k2 := binary.Uvarint(b[k1:])
	if k2 <= 0 || lo+length < lo {
		return nil, errors.New("unsent ranges: truncated or overflowing")
	}
	rest, err := DecodeRanges(lo+length, b[k1+k2:])
	if err != nil {
		return nil, fmt.Errorf("unsent ranges: %w", err)
	}
	return append([]Range{{Lo: lo, Hi: lo + length}}, rest...), nil
}
