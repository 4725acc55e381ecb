// Package sends holds a checkpoint's sends split by message variant and by
// device platform, succeeded and failed apart, and how package lease
// stores them inside the checkpoint's own statements: the per-platform
// counters are columns of the broadcasts row the checkpoint updates
// anyway (PlatformSet), and the per-variant ones the broadcast_variants
// upsert a variant broadcast's checkpoint ran before (AddVariants), so
// the split costs a checkpoint no statement of its own. Both are written
// in the checkpoint's transaction, fenced and idempotent as its counters
// are (a replayed checkpoint adds nothing).
package sends

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// Sent is how many sent targets FCM accepted and how many failed.
type Sent struct{ Succeeded, Failed int64 }

// Split is one checkpoint's sends by variant and by platform.
type Split struct {
	// Variants are keyed by engine variant ("ko", "default", "a",
	// "a:ko"); nil for a broadcast without variants.
	Variants map[string]Sent
	// Platforms are in model.Platforms' order.
	Platforms [len(model.Platforms)]Sent
}

// AddPlatform counts n sends to devices of platform p (a Target's
// Platform; anything but android, ios and web counts as other).
func (s *Split) AddPlatform(p string, n Sent) {
	i := slices.Index(model.Platforms[:], model.PlatformOf([]byte(p)))
	s.Platforms[i].Succeeded += n.Succeeded
	s.Platforms[i].Failed += n.Failed
}

// platformSet is PlatformSet's clause: fixed, so that the statement's
// text never varies.
var platformSet = func() string {
	out := ""
	for _, p := range model.Platforms {
		out += fmt.Sprintf(", %[1]s_succeeded = %[1]s_succeeded + ?, %[1]s_failed = %[1]s_failed + ?", p)
	}
	return out
}()

// PlatformSet is what an UPDATE of the broadcasts row adds for s's
// platforms: a SET clause to append (it starts with a comma) and its
// arguments, in order.
func (s Split) PlatformSet() (string, []any) {
	args := make([]any, 0, 2*len(s.Platforms))
	for _, n := range s.Platforms {
		args = append(args, n.Succeeded, n.Failed)
	}
	return platformSet, args
}

// PlatformColumns are the broadcasts columns PlatformSet adds to, a
// succeeded and a failed per platform in model.Platforms' order, for a
// SELECT list.
func PlatformColumns(alias string) string {
	out := ""
	for i, p := range model.Platforms {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%[1]s.%[2]s_succeeded, %[1]s.%[2]s_failed", alias, p)
	}
	return out
}

// maxVariantRunes is broadcast_variants.variant's width, kept in Go so
// strict SQL mode never rejects a checkpoint.
const maxVariantRunes = 64

// AddVariants upserts per-variant sends of broadcast id in one statement:
// targets (sent: succeeded and failed together, as before the split) and
// succeeded and failed apart, so every row written since keeps targets =
// succeeded + failed and an older row (targets only) is told apart.
// Variants are sorted so concurrent transactions lock the (broadcast_id,
// variant) keys in the same order; names are validated language tags and
// A/B names, cut to the column's 64 characters anyway.
func AddVariants(ctx context.Context, tx sqldb.Execer, id uint64, variants map[string]Sent) error {
	names := make([]string, 0, len(variants))
	for _, v := range slices.Sorted(maps.Keys(variants)) {
		if variants[v] != (Sent{}) {
			names = append(names, v)
		}
	}
	if len(names) == 0 {
		return nil
	}
	args := make([]any, 0, 5*len(names))
	for _, v := range names {
		n := variants[v]
		args = append(args, id, sqldb.ClampRunes(v, maxVariantRunes), n.Succeeded+n.Failed, n.Succeeded, n.Failed)
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO broadcast_variants (broadcast_id, variant, targets, succeeded, failed) VALUES "+
		sqldb.Placeholders(len(names), 5)+
		" ON DUPLICATE KEY UPDATE targets = targets + VALUES(targets), succeeded = succeeded + VALUES(succeeded), failed = failed + VALUES(failed)", args...)
	if err != nil {
		return fmt.Errorf("upsert variant counts: %w", err)
	}
	return nil
}
