package outcome

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"pushfan/internal/platform/sqldb"
)

// A chunk's checkpoints each keep a row (Keep): at the default pace a row
// lists about 140 targets, and the row's own cost (its key, lo and hi,
// the secondary index entries) is several times its blob's. So when a
// chunk ends, Merge folds its rows into as few as the reader needs: each
// target once, its outcome as the readers resolve it (Listing.Better).
//
// The merged rows must answer as the rows they replace do, also beside
// rows written after the merge: a fenced holder's report after a cancel's
// close (lease, fenced.go), and a replay of a checkpoint whose row the
// merge deleted (INSERT IGNORE finds no key to stop it). So a target's
// listing keeps its claim: the winners are grouped by the epoch of the
// listing that won, each group written as that epoch's rows under the
// highest checkpoint sequence of that epoch the merge read. Against any
// later listing L of the target, equal in precedence:
//
//   - L of a later epoch than the winner's beat the winner before and beats
//     its group now; L of an earlier epoch lost before and loses now. So a
//     late holder of an older epoch never outranks a later claim's
//     listing, and one between two claims ranks as it did.
//   - L of the winner's epoch: a holder's checkpoint sequences only grow,
//     so L is either new (above every sequence the merge read: it wins, as
//     it did) or a replay of a row the merge read (its listings were among
//     those merged: the winner beat or was it, and its group's sequence
//     is at least L's, so it still wins).
//
// Rows of other epochs the merge did not see (committed after its
// snapshot) are kept beside, and rank as above. A chunk's rows are only
// written by a holder of the chunk row's lock (or of its late_holders
// row, once the chunk row is gone), so the merge, run in the chunk's
// closing checkpoint with that lock held, reads a bounded, settled set:
// about 70 rows for a chunk of 10,000 targets at the default pace.

// MergedBlobMax bounds the blob of a merged row: an InnoDB row above half
// a page (about 8,100 bytes with 16 KB pages) has its blob moved to an
// overflow page of its own, which a look-up then reads besides the
// index's; below it the row stays in the index's leaf page. (Either way a
// dense chunk of 10,000 targets takes about one 16 KB page: measured in
// docs/CAPACITY.md.)
const MergedBlobMax = 7900

// Row is a target_outcomes row as Merge reads it.
type Row struct {
	Epoch, CkptSeq, Part uint64
	Lo                   uint64
	Blob                 []byte
}

// Group is a set of targets kept under one claim: epoch and checkpoint.
type Group struct {
	Epoch, CkptSeq uint64
	Targets        []Target // ascending cursors, one a cursor
}

// MergeRows resolves rows (one chunk's, ordered by epoch, checkpoint and
// part, as the export reads them) to one listing a target, the one the
// readers pick (Listing.Better; among exact equals, the first), grouped
// by the epoch of the winning listing, each group under the highest
// checkpoint sequence of that epoch among rows. Groups are in epoch order.
func MergeRows(rows []Row) ([]Group, error) {
	var all []Listing
	maxSeq := map[uint64]uint64{}
	for _, r := range rows {
		maxSeq[r.Epoch] = max(maxSeq[r.Epoch], r.CkptSeq)
		if err := Decode(r.Lo, r.Blob, func(o Target) bool {
			all = append(all, Listing{Target: o, Epoch: r.Epoch, CkptSeq: r.CkptSeq})
			return true
		}); err != nil {
			return nil, fmt.Errorf("epoch %d checkpoint %d part %d: %w", r.Epoch, r.CkptSeq, r.Part, err)
		}
	}
	slices.SortStableFunc(all, func(a, b Listing) int { return cmpCursor(a.Target, b.Target) })
	won := map[uint64][]Target{}
	for i := 0; i < len(all); {
		best := all[i]
		j := i + 1
		for ; j < len(all) && all[j].Cursor == best.Cursor; j++ {
			if all[j].Better(best) {
				best = all[j]
			}
		}
		won[best.Epoch] = append(won[best.Epoch], best.Target)
		i = j
	}
	out := make([]Group, 0, len(won))
	for e, ts := range won {
		out = append(out, Group{Epoch: e, CkptSeq: maxSeq[e], Targets: ts})
	}
	slices.SortFunc(out, func(a, b Group) int { return cmpU(a.Epoch, b.Epoch) })
	return out, nil
}

// Split cuts ts (ascending cursors) into the rows Keep and Merge write:
// each spans at most MaxSpan cursors, and with maxBlob > 0 its blob is at
// most maxBlob bytes (a single target over it gets a row of its own).
// It returns each row's targets.
func Split(ts []Target, maxBlob int) [][]Target {
	var out [][]Target
	for len(ts) > 0 {
		lo := ts[0].Cursor
		n, size := 1, targetSize(lo, ts[0])
		for n < len(ts) && ts[n].Cursor-lo <= MaxSpan {
			s := targetSize(ts[n-1].Cursor, ts[n])
			if maxBlob > 0 && size+s > maxBlob {
				break
			}
			size += s
			n++
		}
		out = append(out, ts[:n])
		ts = ts[n:]
	}
	return out
}

// targetSize is how many bytes Encode writes for o after prev.
func targetSize(prev uint64, o Target) int {
	n := uvarintLen((o.Cursor - prev) << kindBits)
	if o.Kind == Failed {
		code := len(o.Code)
		if code == 0 {
			code = len("UNKNOWN") // as Encode writes it
		}
		n += uvarintLen(uint64(code)) + code
	}
	return n
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Merge folds the target_outcomes rows of chunk seq of broadcast id into
// as few as MergeRows and Split leave (a dense chunk of 10,000 targets:
// two rows), in the caller's transaction, which holds the chunk row's
// lock (see the top of this file): it reads the chunk's rows with a plain
// read (no gap lock beside other chunks' inserts), deletes each by its
// full key, and inserts the merged rows under the latest created_at it
// read. It does nothing when merging would not leave fewer rows. It
// returns how many rows it read and wrote.
func Merge(ctx context.Context, tx sqldb.Querier, id, seq uint64) (read, wrote int, err error) {
	return merge(ctx, tx, id, seq, MergedBlobMax)
}

func merge(ctx context.Context, tx sqldb.Querier, id, seq uint64, maxBlob int) (read, wrote int, err error) {
	fail := func(what string, err error) (int, int, error) {
		return read, 0, fmt.Errorf("merge the outcomes of chunk %d/%d: %s: %w", id, seq, what, err)
	}
	// created_at as text: whatever the DSN's parseTime, it goes back as it came.
	rows, err := tx.QueryContext(ctx, `SELECT epoch, ckpt_seq, part, lo, outcomes, DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s.%f')
		FROM target_outcomes WHERE broadcast_id = ? AND seq = ? ORDER BY epoch, ckpt_seq, part`, id, seq)
	if err != nil {
		return fail("read", err)
	}
	var rs []Row
	newest := ""
	for rows.Next() {
		var r Row
		var at string
		if err := rows.Scan(&r.Epoch, &r.CkptSeq, &r.Part, &r.Lo, &r.Blob, &at); err != nil {
			rows.Close()
			return fail("read", err)
		}
		newest = max(newest, at)
		rs = append(rs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail("read", err)
	}
	read = len(rs)
	if read < 2 {
		return read, 0, nil
	}
	groups, err := MergeRows(rs)
	if err != nil {
		return fail("decode", err)
	}
	var args []any
	for _, g := range groups {
		for i, ts := range Split(g.Targets, maxBlob) {
			args = append(args, id, seq, g.Epoch, g.CkptSeq, i, ts[0].Cursor, ts[len(ts)-1].Cursor, len(ts), Encode(ts[0].Cursor, ts), newest)
		}
	}
	if wrote = len(args) / 10; wrote >= read {
		return read, 0, nil
	}
	// Deleted first: a merged row takes the key of one it replaces.
	for b := rs; len(b) > 0; b = b[min(len(b), keepBatch):] {
		del := []any{id, seq}
		for _, r := range b[:min(len(b), keepBatch)] {
			del = append(del, r.Epoch, r.CkptSeq, r.Part)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM target_outcomes WHERE broadcast_id = ? AND seq = ? AND (`+
			strings.TrimSuffix(strings.Repeat("(epoch = ? AND ckpt_seq = ? AND part = ?) OR ", len(del)/3), " OR ")+`)`, del...); err != nil {
			return fail("delete", err)
		}
	}
	// A plain INSERT: every key it writes was read and deleted above (a
	// checkpoint's parts commit together), so a clash is a bug to stop at,
	// never a row to skip.
	for len(args) > 0 {
		b := args[:min(len(args), 10*keepBatch)]
		args = args[len(b):]
		if _, err := tx.ExecContext(ctx, "INSERT INTO target_outcomes (broadcast_id, seq, epoch, ckpt_seq, part, lo, hi, n, outcomes, created_at) VALUES "+
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?), ", len(b)/10), ", "), b...); err != nil {
			return fail("insert", err)
		}
	}
	return read, wrote, nil
}
