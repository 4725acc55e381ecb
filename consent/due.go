package consent

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// ReconfirmYears is how long a consent to advertising stands before the
// sender must ask again: Korea's Network Act (Article 50(8)) has senders
// confirm each user's consent regularly, and its Enforcement Decree
// (Article 62-3) sets the period at two years. A consent last given or
// confirmed before now minus this is due.
const ReconfirmYears = 2

// Cutoff is the reconfirmation cutoff at now: consents whose updated_at
// is before it are due.
func Cutoff(now time.Time) time.Time {
	return now.UTC().AddDate(-ReconfirmYears, 0, 0).Truncate(time.Microsecond)
}

// DuePage is one page of the consents due: granted, last given or
// confirmed before the cutoff, by category (configuration order), then
// oldest first. Next is the cursor of the page after it, "" on the last.
type DuePage struct {
	Consents []model.Consent
	Next     string
}

// Due pages the granted consents last given or confirmed before cutoff,
// of category ("" for every category read from the bundled table),
// after the cursor a previous page returned ("" for the first). Each
// category is one range of idx_user_consents_due (category, granted,
// updated_at, user_id), read from the cursor on in its order: a page
// costs its rows, never a scan of the table.
func (b *Book) Due(ctx context.Context, category string, cutoff time.Time, after string, limit int) (DuePage, error) {
	cats := b.table
	if category != "" {
		if err := b.tableCategory(category); err != nil {
			return DuePage{}, err
		}
		cats = []model.Category{b.all[category]}
	}
	cutoff = cutoff.UTC().Truncate(time.Microsecond)
	var from *dueKey
	if after != "" {
		k, err := parseDueKey(after)
		i := slices.IndexFunc(cats, func(c model.Category) bool { return err == nil && c.Name == k.category })
		if i < 0 {
			return DuePage{}, refuse("after", "invalid_cursor", "after %q is not a cursor this API returned for this category", after)
		}
		cats, from = cats[i:], &k
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	// One row more than the page says whether there is a next one.
	var out []model.Consent
	for _, cat := range cats {
		rows, err := b.dueIn(ctx, cat.Name, cutoff, from, limit+1-len(out))
		if err != nil {
			return DuePage{}, err
		}
		out = append(out, rows...)
		from = nil
		if len(out) > limit {
			break
		}
	}
	page := DuePage{Consents: out}
	if len(out) > limit {
		last := out[limit-1]
		page.Consents, page.Next = out[:limit], dueKey{category: last.Category, updated: last.Updated, userID: last.UserID}.String()
	}
	return page, nil
}

// dueIn reads category's due consents after from (nil: from the first),
// at most n.
func (b *Book) dueIn(ctx context.Context, category string, cutoff time.Time, from *dueKey, n int) ([]model.Consent, error) {
	q, args := dueQuery(category, cutoff, from, n)
	rows, err := b.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the %s consents due: %w", category, err)
	}
	defer rows.Close()
	var out []model.Consent
	for rows.Next() {
		var c model.Consent
		if err := rows.Scan(&c.UserID, &c.Category, &c.Granted, &c.Night, &c.Source, &c.Updated, &c.Changed); err != nil {
			return nil, fmt.Errorf("reading the %s consents due: %w", category, err)
		}
		c.Updated, c.Changed = c.Updated.UTC(), c.Changed.UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the %s consents due: %w", category, err)
	}
	return out, nil
}

// dueQuery is the read of dueIn: one range of idx_user_consents_due.
func dueQuery(category string, cutoff time.Time, from *dueKey, n int) (string, []any) {
	q := `SELECT user_id, category, granted, night, source, updated_at, changed_at
		FROM user_consents FORCE INDEX (idx_user_consents_due)
		WHERE category = ? AND granted = 1 AND updated_at < ?`
	args := []any{category, cutoff}
	if from != nil {
		cond, keyArgs := sqldb.KeyAfter([]string{"updated_at", "user_id"}, []any{from.updated, from.userID})
		q += " AND " + cond
		args = append(args, keyArgs...)
	}
	return q + " ORDER BY updated_at, user_id LIMIT ?", append(args, n)
}

// dueKey is a due consent's place in the walk: its category, then
// (updated_at, user_id) in the index's order.
type dueKey struct {
	category string
	updated  time.Time
	userID   uint64
}

// String is the key as an opaque cursor: base64url of
// "category.unix-microseconds.user_id" (a category name has no dot).
func (k dueKey) String() string {
	raw := k.category + "." + strconv.FormatInt(k.updated.UnixMicro(), 10) + "." + strconv.FormatUint(k.userID, 10)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func parseDueKey(cursor string) (dueKey, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return dueKey{}, err
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 {
		return dueKey{}, fmt.Errorf("cursor has %d parts", len(parts))
	}
	micros, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return dueKey{}, err
	}
	user, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil {
		return dueKey{}, err
	}
	return dueKey{category: parts[0], updated: time.UnixMicro(micros).UTC(), userID: user}, nil
}
