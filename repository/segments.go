package repository

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"pushfan/audit"
	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// Saved segments (issue 42; migration 00032): a segments row per segment,
// with its current version, and a segment_versions row per version, never
// changed once written. A write is one transaction of both, so a segment
// never shows a version that has no row. A deleted segment keeps its
// versions (the broadcasts sent to it name them) and frees its name:
// live_name, unique, is NULL once deleted_at is set.

// ErrSegmentExists is returned (wrapped) when a live segment already has
// the name a new one asks for.
var ErrSegmentExists = errors.New("a segment with this name exists")

// maxSegmentByRunes is segment_versions.created_by's width.
const maxSegmentByRunes = 128

// SegmentEdit is one write of a segment: a new version's description
// (nil on an update: the current version's is kept; nil on a create:
// none), its filter (JSON, checked by the caller: package segment), who
// wrote it and when (zero: now).
type SegmentEdit struct {
	Description *string
	Filter      json.RawMessage
	By          string
	At          time.Time
}

func (e SegmentEdit) at() time.Time {
	if e.At.IsZero() {
		return dbTime(time.Now())
	}
	return dbTime(e.At)
}

// CreateSegment saves a new segment called name at version 1. A live
// segment of that name is ErrSegmentExists.
func (s *Store) CreateSegment(ctx context.Context, name string, e SegmentEdit) (model.Segment, error) {
	at := e.at()
	desc := ""
	if e.Description != nil {
		desc = *e.Description
	}
	err := sqldb.InTx(ctx, s.db.DB, s.log, "create segment", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO segments (name, version, created_at, updated_at) VALUES (?, 1, ?, ?)", name, at, at)
		if err != nil {
			if sqldb.IsDuplicateEntry(err) && strings.Contains(err.Error(), "uq_segments_live_name") {
				return ErrSegmentExists
			}
			return fmt.Errorf("insert: %w", err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("insert id: %w", err)
		}
		if err := insertSegmentVersion(ctx, tx, uint64(id), 1, desc, e, at); err != nil {
			return err
		}
		audit.Created(ctx, "segment", name)
		return audit.Write(ctx, tx) // the request's audit entry commits with the segment
	})
	if err != nil {
		return model.Segment{}, fmt.Errorf("segment %q: %w", name, err)
	}
	return model.Segment{Name: name, Version: 1, Description: desc, Filter: e.Filter, CreatedAt: at, UpdatedAt: at,
		CreatedBy: sqldb.ClampRunes(e.By, maxSegmentByRunes)}, nil
}

// UpdateSegment writes the next version of the live segment called name
// and makes it current; ErrNotFound (wrapped) for none. The segment's row
// is locked for the transaction: two updates at once make two versions,
// one after the other.
func (s *Store) UpdateSegment(ctx context.Context, name string, e SegmentEdit) (model.Segment, error) {
	at := e.at()
	var seg model.Segment
	err := sqldb.InTx(ctx, s.db.DB, s.log, "update segment", func(tx *sql.Tx) error {
		var id uint64
		var desc string
		seg = model.Segment{Name: name}
		err := tx.QueryRowContext(ctx, `SELECT s.id, s.version, s.created_at, v.description FROM segments s
			JOIN segment_versions v ON v.segment_id = s.id AND v.version = s.version
			WHERE s.live_name = ? FOR UPDATE`, name).Scan(&id, &seg.Version, &seg.CreatedAt, &desc)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if e.Description != nil {
			desc = *e.Description
		}
		seg.Version++
		seg.Description, seg.Filter, seg.UpdatedAt = desc, e.Filter, at
		seg.CreatedBy = sqldb.ClampRunes(e.By, maxSegmentByRunes)
		if err := insertSegmentVersion(ctx, tx, id, seg.Version, desc, e, at); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE segments SET version = ?, updated_at = ? WHERE id = ?", seg.Version, at, id); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		audit.SetDetail(ctx, "version", seg.Version)
		return audit.Write(ctx, tx) // the request's audit entry commits with the version
	})
	if err != nil {
		return model.Segment{}, fmt.Errorf("segment %q: %w", name, err)
	}
	seg.CreatedAt = seg.CreatedAt.UTC()
	return seg, nil
}

func insertSegmentVersion(ctx context.Context, tx *sql.Tx, id uint64, version int, desc string, e SegmentEdit, at time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO segment_versions (segment_id, version, description, filter, created_at, created_by)
		VALUES (?, ?, ?, ?, ?, ?)`, id, version, desc, string(e.Filter), at, sqldb.ClampRunes(e.By, maxSegmentByRunes))
	if err != nil {
		return fmt.Errorf("insert version %d: %w", version, err)
	}
	return nil
}

// Segment reads the live segment called name at its current version,
// with the list of its versions (oldest first, without their filters);
// ErrNotFound (wrapped) for none. Both reads are one transaction, one
// snapshot under InnoDB's repeatable read: an update between them cannot
// list a version newer than the current one.
func (s *Store) Segment(ctx context.Context, name string) (model.Segment, error) {
	var seg model.Segment
	err := sqldb.InTx(ctx, s.db.DB, s.log, "read segment", func(tx *sql.Tx) error {
		var err error
		seg, err = readSegment(ctx, tx, name)
		return err
	})
	if err != nil {
		return model.Segment{}, fmt.Errorf("segment %q: %w", name, err)
	}
	return seg, nil
}

func readSegment(ctx context.Context, tx *sql.Tx, name string) (model.Segment, error) {
	seg := model.Segment{Name: name}
	var id uint64
	var filter string
	err := tx.QueryRowContext(ctx, `SELECT s.id, s.version, s.created_at, s.updated_at, v.description, v.filter, v.created_by
		FROM segments s JOIN segment_versions v ON v.segment_id = s.id AND v.version = s.version
		WHERE s.live_name = ?`, name).Scan(&id, &seg.Version, &seg.CreatedAt, &seg.UpdatedAt, &seg.Description, &filter, &seg.CreatedBy)
	if errors.Is(err, sql.ErrNoRows) {
		return seg, ErrNotFound
	}
	if err != nil {
		return seg, err
	}
	seg.Filter = json.RawMessage(filter)
	seg.CreatedAt, seg.UpdatedAt = seg.CreatedAt.UTC(), seg.UpdatedAt.UTC()
	rows, err := tx.QueryContext(ctx, `SELECT version, description, created_at, created_by FROM segment_versions
		WHERE segment_id = ? ORDER BY version`, id)
	if err != nil {
		return seg, fmt.Errorf("versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var v model.SegmentVersion
		if err := rows.Scan(&v.Version, &v.Description, &v.CreatedAt, &v.CreatedBy); err != nil {
			return seg, fmt.Errorf("versions: %w", err)
		}
		v.CreatedAt = v.CreatedAt.UTC()
		seg.Versions = append(seg.Versions, v)
	}
	if err := rows.Err(); err != nil {
		return seg, fmt.Errorf("versions: %w", err)
	}
	return seg, nil
}

// Segments lists the live segments by name: each one's current version,
// description and times, without its filter or versions.
func (s *Store) Segments(ctx context.Context) ([]model.Segment, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT s.name, s.version, v.description, s.created_at, s.updated_at, v.created_by
		FROM segments s JOIN segment_versions v ON v.segment_id = s.id AND v.version = s.version
		WHERE s.live_name IS NOT NULL ORDER BY s.live_name`)
	if err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	defer rows.Close()
	out := []model.Segment{}
	for rows.Next() {
		var seg model.Segment
		if err := rows.Scan(&seg.Name, &seg.Version, &seg.Description, &seg.CreatedAt, &seg.UpdatedAt, &seg.CreatedBy); err != nil {
			return nil, fmt.Errorf("list segments: %w", err)
		}
		seg.CreatedAt, seg.UpdatedAt = seg.CreatedAt.UTC(), seg.UpdatedAt.UTC()
		out = append(out, seg)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	return out, nil
}

// DeleteSegment deletes the live segment called name (at, zero: now): it
// leaves the lists and frees its name; its versions stay, for the
// broadcasts sent to them. ErrNotFound (wrapped) for none.
func (s *Store) DeleteSegment(ctx context.Context, name string, at time.Time) error {
	if at.IsZero() {
		at = time.Now()
	}
	// One transaction with the request's audit entry.
	err := sqldb.InTx(ctx, s.db.DB, s.log, "delete segment", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE segments SET deleted_at = ? WHERE live_name = ?", dbTime(at), name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrNotFound
		}
		return audit.Write(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("delete segment %q: %w", name, err)
	}
	return nil
}

// SegmentVersion reads one version of the live segment called name, with
// its filter; ErrNotFound (wrapped) for no such segment or version.
func (s *Store) SegmentVersion(ctx context.Context, name string, version int) (model.SegmentVersion, error) {
	var v model.SegmentVersion
	var filter string
	err := s.db.QueryRowContext(ctx, `SELECT v.version, v.description, v.filter, v.created_at, v.created_by
		FROM segments s JOIN segment_versions v ON v.segment_id = s.id
		WHERE s.live_name = ? AND v.version = ?`, name, version).Scan(&v.Version, &v.Description, &filter, &v.CreatedAt, &v.CreatedBy)
	if errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("segment %q version %d: %w", name, version, ErrNotFound)
	}
	if err != nil {
		return v, fmt.Errorf("segment %q version %d: %w", name, version, err)
	}
	v.Filter, v.CreatedAt = json.RawMessage(filter), v.CreatedAt.UTC()
	return v, nil
}
