package audience

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// Runner runs named audiences' SQL on one pool: the deployment's database,
// given at wiring time. It is safe for concurrent use.
type Runner struct{ db *sqlx.DB }

// NewRunner returns a Runner on db.
func NewRunner(db *sqlx.DB) *Runner { return &Runner{db: db} }

// Check validates a at start-up (see Audience.Check).
func (r *Runner) Check(ctx context.Context, a *Audience) error { return a.Check(ctx, r.db) }

// Page reads one keyset page of b within (after, upto] (see Bound.PageRange).
func (r *Runner) Page(ctx context.Context, b Bound, after, upto uint64, limit int, dst []Row) ([]Row, error) {
	return b.PageRange(ctx, r.db, after, upto, limit, dst)
}

// Cursors reads the cursors of one keyset page of b (see Bound.Cursors).
func (r *Runner) Cursors(ctx context.Context, b Bound, after uint64, limit int, dst []uint64) ([]uint64, error) {
	return b.Cursors(ctx, r.db, after, limit, dst)
}

// Targets reads one keyset page of b's targets without their variables
// (see Bound.Targets).
func (r *Runner) Targets(ctx context.Context, b Bound, after uint64, limit int, dst []Row) ([]Row, error) {
	return b.Targets(ctx, r.db, after, limit, dst)
}

// Preview counts b and samples up to n user ids (see Bound.Preview).
func (r *Runner) Preview(ctx context.Context, b Bound, n int) (int64, []uint64, error) {
	return b.Preview(ctx, r.db, n)
}

// PreviewEach is Preview calling each with every page's user ids (see
// Bound.PreviewEach).
func (r *Runner) PreviewEach(ctx context.Context, b Bound, n int, each func(context.Context, []uint64) error) (int64, []uint64, error) {
	return b.PreviewEach(ctx, r.db, n, each)
}
