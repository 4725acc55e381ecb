package repository

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"pushfan/model"
)

// decodeVariants sets b.Variants from broadcast_variants' JSON object, read
// in the broadcast's own statement (selectBroadcast) so that, like the
// errors, the counts add up to succeeded + failed at any instant. A
// localized broadcast gets a map even before its first checkpoint; any
// other keeps nil.
func decodeVariants(b *model.Broadcast, raw sql.NullString) error {
	if raw.Valid {
		if err := json.Unmarshal([]byte(raw.String), &b.Variants); err != nil {
			return fmt.Errorf("broadcast %d: decode variant counts: %w", b.ID, err)
		}
	}
	if b.Variants == nil && len(b.Message.Localized) > 0 {
		b.Variants = map[string]int64{}
	}
	return nil
}
