package lease

import (
	"context"
	"fmt"
)

// Stranded returns up to limit broadcasts that a counter keeps open: still
// planning, queued or running, fully planned, their open_chunks above 0,
// and yet no chunk row that is not done. A release that ended chunks
// without keeping open_chunks leaves them so (one from before migration
// 00014 still running beside a newer one: docs/operations.md, "Upgrades");
// no chunk end will ever bring the counter to 0 again. Repair finishes
// them.
//
// Chunk rows exist for unfinished broadcasts only (Finish deletes them),
// so it looks at those: a loose scan of (broadcast_id, status) reads each
// one's lowest and highest status, two index entries a broadcast however
// many chunks it has, and keeps the broadcasts whose both are 'done'; the
// broadcast rows it then reads are the open ones (an index on status).
// Hundreds of open broadcasts cost a few hundred index reads. (A NOT
// EXISTS per broadcast reads every chunk row of the broadcasts still
// sending: MariaDB searches it by broadcast_id alone.)
func (s *Store) Stranded(ctx context.Context, limit int) ([]uint64, error) {
	ids, err := queryIDs(ctx, s.db, `SELECT b.id FROM (
			SELECT broadcast_id FROM broadcast_chunks FORCE INDEX (idx_chunks_broadcast_status)
			GROUP BY broadcast_id HAVING MIN(status) = 'done' AND MAX(status) = 'done'
		) d JOIN broadcasts b ON b.id = d.broadcast_id
		WHERE b.status IN ('planning', 'queued', 'running') AND b.planning = 0 AND b.open_chunks > 0
		ORDER BY b.id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("stranded broadcasts: %w", err)
	}
	return ids, nil
}

// Repair finishes broadcast id, as Finish does, when every chunk row is
// done although its open_chunks counter says some are open: a broadcast
// whose chunks are all done is finished, whatever a counter says. It
// reports the counter it found and whether this call repaired the
// broadcast; a broadcast with a chunk still open, a counter at 0 (Finish's
// to end) or a final status is left as it is. The chunk rows and the
// broadcast row are locked as Finish locks them, so two instances
// repairing the same broadcast repair it once.
func (s *Store) Repair(ctx context.Context, id uint64) (counted int64, repaired bool, err error) {
	repaired, counted, err = s.finish(ctx, id, true)
	if err != nil {
		return 0, false, fmt.Errorf("repair broadcast %d: %w", id, err)
	}
	return counted, repaired, nil
}
