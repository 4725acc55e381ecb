package lease

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"pushfan/internal/platform/sqldb"
)

// AddVariantCounts upserts per-variant target counts (a localized
// message's languages) of broadcast id in one statement. It runs in the
// checkpoint's transaction, like AddErrorCounts, so a replayed checkpoint
// never adds them twice. Variants are sorted so concurrent transactions
// lock the (broadcast_id, variant) keys in the same order; names are
// validated language tags, cut to the column's 64 characters anyway.
func AddVariantCounts(ctx context.Context, tx sqldb.Execer, id uint64, variants map[string]int64) error {
	names := make([]string, 0, len(variants))
	for _, v := range slices.Sorted(maps.Keys(variants)) {
		if variants[v] != 0 {
			names = append(names, v)
		}
	}
	if len(names) == 0 {
		return nil
	}
	args := make([]any, 0, 3*len(names))
	for _, v := range names {
		args = append(args, id, sqldb.ClampRunes(v, maxCodeRunes), variants[v])
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO broadcast_variants (broadcast_id, variant, targets) VALUES "+
		sqldb.Placeholders(len(names), 3)+" ON DUPLICATE KEY UPDATE targets = targets + VALUES(targets)", args...)
	if err != nil {
		return fmt.Errorf("upsert variant counts: %w", err)
	}
	return nil
}
