package server_test

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/config"
	"pushfan/fcmemu"
	"pushfan/internal/devtools/demo"
	"pushfan/internal/testsupport/teststack"
	"pushfan/lease"
	"pushfan/model"
)

// A broadcast to 3 users is one chunk, whatever the size of the tokens
// table: on 240k tokens (24 chunk widths) it takes about as long as on
// 300 (make bench-scale times it beside 20 waiting broadcasts on 10M).
func TestSmallUserIDsBroadcastIsOneChunkOnABigTable(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 240k tokens")
	}
	run := func(users int) (time.Duration, teststack.Broadcast) {
		s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
			c.Engine.ChunkWidth = 10000 // the default
		}})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		if _, _, err := s.Seeder().SeedDemo(ctx, demo.SeedOptions{Users: users, TokensPerUserMax: 1}); err != nil {
			t.Fatal(err)
		}
		ids := []uint64{7, uint64(users / 2), uint64(users - 3)}
		var best time.Duration
		var b teststack.Broadcast
		for range 3 { // best of three: the first pays for cold caches
			start := time.Now()
			resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"user_ids": ids}}, &b)
			took := time.Since(start)
			if resp.StatusCode != 200 || b.Status != "completed" || b.Targeted != 3 || b.Succeeded != 3 {
				t.Fatalf("on %d tokens: %d %+v", users, resp.StatusCode, b)
			}
			if best == 0 || took < best {
				best = took
			}
		}
		for _, uid := range ids {
			if c := s.Emu.Counts(demo.SeedTokenName(uid, 1, false)); c.Accepted != 3 {
				t.Fatalf("user %d's token accepted %d times over 3 broadcasts", uid, c.Accepted)
			}
		}
		return best, b
	}
	small, bs := run(300)
	big, bb := run(240_000)
	for _, b := range []teststack.Broadcast{bs, bb} {
		if b.Chunks == nil || b.Chunks.Chunks != 1 || b.Chunks.Claims != 1 {
			t.Fatalf("a 3-user broadcast made %+v, want one chunk claimed once", b.Chunks)
		}
	}
	t.Logf("3-user broadcast, synchronous POST to completion (best of 3): %v on 300 tokens, %v on 240k tokens; one chunk each",
		small.Round(time.Millisecond), big.Round(time.Millisecond))
}

// A large user_ids audience is split by the token ids it really has, and
// "all" starts at the lowest live token (the plans themselves are checked
// in package repository).
func TestChunksFollowTheAudience(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.ChunkWidth = 1000
		c.Engine.MaxUserIDs = 5000
	}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, _, err := s.Seeder().SeedDemo(ctx, demo.SeedOptions{Users: 20000, TokensPerUserMax: 1}); err != nil {
		t.Fatal(err)
	}
	// Every 4th user: 2,500 targets spread over 10,000 token ids.
	var ids []uint64
	for uid := uint64(4); uid <= 10000; uid += 4 {
		ids = append(ids, uid)
	}
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"user_ids": ids}}, &b)
	b = s.WaitFinished(b.ID, time.Minute)
	if b.Status != "completed" || b.Targeted != 2500 || b.Succeeded != 2500 || b.Chunks.Chunks != 3 {
		t.Fatalf("user_ids: %+v in %+v, want 2500 targets in 3 chunks", b, b.Chunks)
	}
	s.MustExec("UPDATE device_tokens SET invalidated_at = NOW(6) WHERE id <= 5000")
	var all teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &all)
	all = s.WaitFinished(all.ID, time.Minute)
	if all.Status != "completed" || all.Targeted != 15000 || all.Succeeded != 15000 || all.Chunks.Chunks != 15 {
		t.Fatalf("all: %+v in %+v, want 15000 targets in 15 chunks (ids 5001-20000)", all, all.Chunks)
	}
}

// Canceling a broadcast with thousands of chunks queued beside another
// broadcast closes them in one statement and counts their planned targets
// as canceled: it is final at once, with exact counts.
func TestCancelOfThousandsOfQueuedChunksIsFinalAtOnce(t *testing.T) {
	coveredBy(t, "lease (TestStopClosesPendingChunksAndIsIdempotent)")
	s := teststack.New(t, teststack.Options{
		Emulator: fcmemu.Config{Latency: 50 * time.Millisecond},
		Configure: func(c *config.Config) {
			c.Engine.ChunkWidth = 10
			c.Engine.ChunkParallel = 1
			c.Engine.Concurrency = 4
		},
	})
	s.SeedTokens(1, tokens("ok-", 30000))
	var busy, queued teststack.Broadcast
	s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "first", "audience": map[string]any{"all": true}}, &busy)
	s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "second", "audience": map[string]any{"all": true}}, &queued)
	waitUntil(t, "the queued broadcast's 3000 chunks counted", 30*time.Second, func() bool {
		var cur teststack.Broadcast
		s.Do("GET", "/push/broadcasts/"+itoa(queued.ID), nil, &cur)
		return cur.Targeted == 30000
	})
	start := time.Now()
	var c teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcasts/"+itoa(queued.ID)+"/cancel", nil, &c); resp.StatusCode != 200 {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	took := time.Since(start)
	// The two take turns chunk by chunk (one slot, 50 ms sends): the few of
	// its chunks that ran before the cancel are counted as sent, the rest
	// canceled, every target once.
	if c.Status != "canceled" || c.Canceled+c.Succeeded != 30000 || c.Targeted != 30000 || c.Failed != 0 ||
		c.Succeeded > 100 || c.Chunks.Chunks != 3000 || c.Chunks.DoneBy["canceled"] < 2990 {
		t.Fatalf("after cancel: %+v (%+v), want 30000 targets over 3000 chunks, all but a few chunks' canceled", c, c.Chunks)
	}
	s.Do("POST", "/push/broadcasts/"+itoa(busy.ID)+"/cancel", nil, &c)
	t.Logf("cancel of a broadcast with 3000 chunks queued behind another: final in %v", took.Round(time.Millisecond))
}

// A named audience is split into chunks at the cursors its plan counted,
// whether its query takes :upto (a chunk's pages stop at its end) or not
// (a chunk's last page is cut at its end).
func TestNamedAudienceSplitsWhereItsCursorAllows(t *testing.T) {
	t.Parallel()
	defs := []audience.Definition{
		{Name: "split", SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after AND t.id <= :upto AND t.invalidated_at IS NULL ORDER BY t.id LIMIT :limit"},
		{Name: "whole", SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after AND t.invalidated_at IS NULL ORDER BY t.id LIMIT :limit"},
	}
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Audiences = defs
		c.Engine.ChunkWidth = 1000
	}})
	s.SeedTokens(1, tokens("ok-", 4500))
	for name, want := range map[string]int{"split": 5, "whole": 5} {
		var b teststack.Broadcast
		s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"name": name}}, &b)
		b = s.WaitFinished(b.ID, time.Minute)
		if b.Status != "completed" || b.Targeted != 4500 || b.Succeeded != 4500 || b.Chunks == nil || b.Chunks.Chunks != want {
			t.Fatalf("%s: %+v (chunks %+v), want 4500 in %d chunks", name, b, b.Chunks, want)
		}
	}
	for _, tk := range tokens("ok-", 4500) {
		if c := s.Emu.Counts(tk); c.Accepted != 2 {
			t.Fatalf("%s accepted %d times over two broadcasts", tk, c.Accepted)
		}
	}
}

// In a rolling deploy, an instance whose configuration lacks a named
// audience hands its chunks back for one that has it; when no instance
// has it for HandBackTimeout, the broadcast fails naming the audience.
func TestChunksAnInstanceCannotRunAreHandedBack(t *testing.T) {
	defs := []audience.Definition{{Name: "new_segment",
		SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after AND t.id <= :upto ORDER BY t.id LIMIT :limit"}}
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.ChunkWidth = 300
		c.Engine.HandBackTimeout = 3 * time.Second
	}})
	s.SeedTokens(1, tokens("ok-", 3000))
	newer := s.AddInstanceWith(func(c *config.Config) { c.Audiences = defs })
	var b teststack.Broadcast
	s.DoURL(newer.API.URL, "POST", "/push/broadcast?wait=0", map[string]any{"title": "x", "audience": map[string]any{"name": "new_segment"}}, &b)
	final := s.WaitFinished(b.ID, time.Minute)
	if final.Status != "completed" || final.Succeeded != 3000 || final.Targeted != 3000 {
		t.Fatalf("final %+v", final)
	}
	if by := final.Chunks.DoneBy; by[newer.Service.Owner()] != final.Chunks.Chunks {
		t.Fatalf("chunks done by %v: only the instance with the audience can run them", by)
	}
	t.Logf("rolling deploy: %d chunks, %d claims (the older instance handed %d back)", final.Chunks.Chunks, final.Chunks.Claims, final.Chunks.Claims-final.Chunks.Chunks)

	// No instance has it: a broadcast stored by a newer version that is
	// gone again.
	ghost := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "x"}, Audience: model.Audience{Name: "ghost_segment"}}}
	if err := s.Leases.Submit(t.Context(), ghost, func(context.Context, *sql.Tx, *model.Broadcast) (*lease.Step, error) {
		return nil, nil // planned later, by an instance that has the audience: none has
	}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	failed := s.WaitFinished(ghost.ID, time.Minute)
	if failed.Status != "failed" || failed.Error == nil || !strings.Contains(*failed.Error, `"ghost_segment"`) {
		t.Fatalf("a broadcast no instance can run: %+v", failed)
	}
	if took := time.Since(start); took < 3*time.Second {
		t.Fatalf("failed after %v, before the hand-back timeout", took)
	}
	t.Logf("no instance can run it: failed after %v: %s", time.Since(start).Round(100*time.Millisecond), *failed.Error)
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// waitUntil polls cond every 20 ms until it holds, failing the test with
// what it was waiting for after within (the package's one polling wait).
func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	teststack.WaitEvery(t, what, within, 20*time.Millisecond, cond)
}
