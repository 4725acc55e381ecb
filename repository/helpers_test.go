package repository_test

import (
	"context"
	"math"
	"testing"
	"time"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// leases is the state owner on s's database, which stores broadcasts with
// their status (fixtures: lease.Store.Create).
func leases(s *repository.Store) *lease.Store { return lease.New(s.DB().DB, nil) }

// newStore gives the test its own migrated database.
func newStore(t testing.TB) *repository.Store {
	t.Helper()
	tdb := testdb.New(t)
	s, _ := tdb.Store, tdb.DSN
	return s
}

// ctx returns a context that ends with the test (and after a minute at most),
// so a hung query fails the test instead of the whole run.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// exec runs raw SQL for fixtures that the repository API does not write.
func exec(t testing.TB, s *repository.Store, q string, args ...any) {
	t.Helper()
	if _, err := s.DB().ExecContext(ctx(t), q, args...); err != nil {
		t.Fatalf("exec %q: %v", q, err)
	}
}

// insertToken inserts a token naming only contract columns and returns its id.
func insertToken(t testing.TB, s *repository.Store, userID uint64, token string) uint64 {
	t.Helper()
	res, err := s.DB().ExecContext(ctx(t), "INSERT INTO device_tokens (user_id, token) VALUES (?, ?)", userID, token)
	if err != nil {
		t.Fatalf("insert token %q: %v", token, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return uint64(id)
}

// pageAll walks the whole audience with AudiencePage, reusing one buffer, and
// checks that ids strictly increase across pages (no duplicate, no reorder).
func pageAll(t testing.TB, s *repository.Store, a model.Audience, limit int) []repository.Target {
	t.Helper()
	var (
		all   []repository.Target
		buf   = make([]repository.Target, 0, limit)
		after uint64
		pages int
	)
	for {
		page, err := s.AudiencePage(ctx(t), a, after, math.MaxUint64, limit, buf)
		if err != nil {
			t.Fatalf("AudiencePage(after=%d): %v", after, err)
		}
		if len(page) > limit {
			t.Fatalf("page of %d targets exceeds limit %d", len(page), limit)
		}
		if len(page) > 0 && &page[0] != &buf[:1][0] {
			t.Fatalf("AudiencePage did not reuse dst's backing array")
		}
		for _, tg := range page {
			if tg.TokenID <= after {
				t.Fatalf("token id %d after cursor %d: duplicate or out of order", tg.TokenID, after)
			}
			after = tg.TokenID
		}
		all = append(all, page...)
		pages++
		if len(page) < limit {
			break
		}
		buf = page
	}
	t.Logf("paged %d targets in %d pages of at most %d", len(all), pages, limit)
	return all
}
