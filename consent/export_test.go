package consent

import "time"

// SetNow makes the book's clock now (tests that age consents).
func (b *Book) SetNow(now func() time.Time) { b.now = now }

// DueQuery is the statement Due runs for one category after cursor
// ("" for the first page): for EXPLAIN.
func DueQuery(category string, cutoff time.Time, cursor string, n int) (string, []any) {
	var from *dueKey
	if cursor != "" {
		k, err := parseDueKey(cursor)
		if err != nil {
			panic(err)
		}
		from = &k
	}
	return dueQuery(category, cutoff, from, n)
}
