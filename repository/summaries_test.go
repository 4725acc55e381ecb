package repository_test

import (
	"testing"
	"time"

	"pushfan/repository"
)

// A summaries stage walks the finished broadcasts from its cursor, a page
// at a time: every real broadcast that sent something comes once, in
// finish order, ties at one instant included, and a dry run, one that
// sent nothing, one before the cursor and one not yet due never come.
func TestFinishedAfterWalksFromTheCursor(t *testing.T) {
	s := newStore(t)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	add := func(id uint64, sec int, succeeded int, dry bool) {
		exec(t, s, `INSERT INTO broadcasts (id, status, dry_run, message, audience, succeeded, finished_at) VALUES (?, 'completed', ?, '{}', '{}', ?, ?)`,
			id, dry, succeeded, at(sec))
	}
	add(1, 0, 5, false)  // before the cursor
	add(2, 10, 5, false) // the cursor
	add(3, 10, 5, false) // tied with the cursor, after it by id
	add(4, 10, 0, false) // sent nothing
	add(5, 10, 5, true)  // a dry run
	add(6, 20, 5, false)
	add(7, 20, 5, false)
	add(8, 30, 5, false)
	add(9, 40, 5, false) // at the window's end: not due yet
	var got []repository.FinishedBroadcast
	cur := repository.FinishedBroadcast{At: at(10), ID: 2}
	for {
		page, err := s.FinishedAfter(ctx(t), cur.At, cur.ID, at(40), 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		cur = page[len(page)-1]
	}
	want := []repository.FinishedBroadcast{{At: at(10), ID: 3}, {At: at(20), ID: 6}, {At: at(20), ID: 7}, {At: at(30), ID: 8}}
	if len(got) != len(want) {
		t.Fatalf("walked %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || !got[i].At.Equal(want[i].At) {
			t.Fatalf("walked %+v, want %+v", got, want)
		}
	}
}
