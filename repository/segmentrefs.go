package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pushfan/model"
)

// SegmentCurrent is the live segment named name as a broadcast is sent to
// it: its current version and that version's filter. An unknown or
// deleted name is ErrNotFound (wrapped).
func (s *Store) SegmentCurrent(ctx context.Context, name string) (model.SegmentRef, error) {
	ref := model.SegmentRef{Name: name}
	var filter string
	err := s.db.QueryRowContext(ctx, `SELECT s.version, v.filter FROM segments s
		JOIN segment_versions v ON v.segment_id = s.id AND v.version = s.version
		WHERE s.live_name = ?`, name).Scan(&ref.Version, &filter)
	if errors.Is(err, sql.ErrNoRows) {
		return ref, fmt.Errorf("segment %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return ref, fmt.Errorf("segment %q: %w", name, err)
	}
	ref.Filter = []byte(filter)
	return ref, nil
}
