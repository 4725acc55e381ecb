package run

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"pushfan/lease"
	"pushfan/model"
	"pushfan/webhook"
)

// A checkpoint invalidates its dead tokens in its own transaction: the
// transaction sees them invalidated before it commits and nobody else
// does, a checkpoint that fails stores neither its outcomes nor its
// invalidations and is retried unchanged, and each dead token is
// invalidated once, with its code. A token that failed transiently
// every attempt is counted failed and stays valid.
func TestDeadTokensAreInvalidatedInTheCheckpointsTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var users []user
	tokenOf := map[uint64]string{}
	wantDead := map[string]string{}
	for id := uint64(1); id <= 60; id++ {
		u := user{id: id, token: fmt.Sprintf("ok-%d", id)}
		switch {
		case id%5 == 0:
			u.token = fmt.Sprintf("unregistered-%d", id)
		case id%7 == 0:
			u.token = fmt.Sprintf("invalid-%d", id)
		case id%11 == 0:
			u.token = fmt.Sprintf("unavailable-%d", id)
		}
		if code, dead := codeOf(u.token); dead {
			wantDead[u.token] = code
		}
		users = append(users, u)
		tokenOf[id] = u.token
	}
	f.seed(users)

	// What each checkpoint's transaction told the tokens.invalidated
	// hook, and what it and the rest of the database saw then.
	type call struct {
		tokens          []string
		inside, outside map[string]string
		failureRows     int // of its tokens, committed
	}
	var mu sync.Mutex
	var calls []call
	hook := func(ctx context.Context, tx *sql.Tx, _ uint64, dead []webhook.DeadToken) error {
		c := call{}
		for _, d := range dead {
			c.tokens = append(c.tokens, tokenOf[d.TokenID])
			if tokenOf[d.UserID] != tokenOf[d.TokenID] || wantDead[tokenOf[d.TokenID]] != d.Code {
				t.Errorf("dead token %+v: want user %d and code %s", d, d.TokenID, wantDead[tokenOf[d.TokenID]])
			}
		}
		slices.Sort(c.tokens)
		var err error
		if c.inside, err = invalidatedIn(ctx, tx, c.tokens); err == nil {
			c.outside, err = invalidatedIn(ctx, f.db.SQL, c.tokens)
		}
		if err == nil {
			ids := make([]any, len(dead))
			for i, d := range dead {
				ids[i] = d.TokenID
			}
			err = f.db.SQL.QueryRowContext(ctx, "SELECT COUNT(*) FROM broadcast_failures WHERE token_id IN (?"+
				strings.Repeat(", ?", len(ids)-1)+")", ids...).Scan(&c.failureRows)
		}
		if err != nil {
			t.Errorf("reading the tokens in the hook: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, c)
		if len(calls) == 1 {
			return errors.New("the outbox is down") // the checkpoint rolls back
		}
		return nil
	}

	id := f.submit(model.Audience{All: true})
	n := f.start("a", 100, nodeOptions{invalidated: hook})
	b := f.waitFinal(id)
	n.stop(t, ErrShutdown)

	mu.Lock()
	defer mu.Unlock()
	if len(calls) < 2 {
		t.Fatalf("%d checkpoints with dead tokens, want the failed one and its retry at least", len(calls))
	}
	if !slices.Equal(calls[1].tokens, calls[0].tokens) {
		t.Fatalf("the failed checkpoint told %v, its retry %v: want it retried unchanged", calls[0].tokens, calls[1].tokens)
	}
	told := map[string]int{}
	for i, c := range calls {
		if want := pick(wantDead, c.tokens); !reflect.DeepEqual(c.inside, want) {
			t.Errorf("checkpoint %d: its transaction sees %v invalidated, want %v", i, c.inside, want)
		}
		if len(c.outside) != 0 || c.failureRows != 0 {
			t.Errorf("checkpoint %d: before it commits, the database has %v invalidated and %d of their failures", i, c.outside, c.failureRows)
		}
		if i > 0 {
			for _, tk := range c.tokens {
				told[tk]++
			}
		}
	}
	for tk := range wantDead {
		if told[tk] != 1 {
			t.Errorf("%s told the hook by %d stored checkpoints, want 1", tk, told[tk])
		}
	}

	var all []string
	for _, u := range users {
		all = append(all, u.token)
	}
	if got := f.invalidated(all); !reflect.DeepEqual(got, wantDead) {
		t.Fatalf("invalidated %v, want %v (and no token that failed transiently)", got, wantDead)
	}
	fs, err := f.db.Store.ListFailures(f.ctx(), id, model.FailureFilter{}, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, fl := range fs {
		tk := tokenOf[fl.TokenID]
		wantAttempts := 1
		if fl.Code == "UNAVAILABLE" {
			wantAttempts = maxAttempts
		}
		if _, dup := got[tk]; dup || fl.Attempts != wantAttempts {
			t.Errorf("failure %+v of %s: duplicate %v, want %d attempts", fl, tk, dup, wantAttempts)
		}
		got[tk] = fl.Code
	}
	wantFailed := maps.Clone(wantDead)
	for _, u := range users {
		if code, _ := codeOf(u.token); code == "UNAVAILABLE" {
			wantFailed[u.token] = code
		}
	}
	if !reflect.DeepEqual(got, wantFailed) {
		t.Fatalf("failures %v, want %v", got, wantFailed)
	}
	if b.Status != model.StatusCompleted || b.Failed != int64(len(wantFailed)) || b.Invalidated != int64(len(wantDead)) ||
		b.Succeeded != int64(len(users)-len(wantFailed)) || b.Errors["UNAVAILABLE"] != int64(len(wantFailed)-len(wantDead)) {
		t.Fatalf("broadcast %s with %+v: want completed, %d failed of which %d invalidated", b.Status, b.Counts, len(wantFailed), len(wantDead))
	}
}

// pick is m's entries for keys.
func pick(m map[string]string, keys []string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// A run stopped mid-chunk, with sends in flight, is resumed by another
// runner from its stored checkpoint: no target the checkpoint stored is
// sent again, every target is accepted exactly once, and the counters
// count each once. Stopped as an instance stops (its run stores what it
// has and hands the chunk back), the other runner claims the chunk at
// once; stopped as by a crash (nothing stored past the last checkpoint,
// the chunk left leased), it takes the chunk over when the lease expires.
func TestARunStoppedMidChunkIsResumedFromItsCheckpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		cause     error
		takeovers int
	}{
		{"handed back", ErrShutdown, 0},
		{"crashed", errLeaseLost, 1}, // the cause of a run that stores nothing more
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			var users []user
			for id := uint64(1); id <= 90; id++ {
				users = append(users, user{id: id, token: fmt.Sprintf("ok-%d", id)})
			}
			f.seed(users)
			// Two sends of the first chunk hang until their send timeout,
			// after the runner stopped: they never reach FCM. The chunk's
			// other targets are sent.
			f.fcm.holdTokens("ok-13", "ok-14")
			const width, stored = 30, 28
			id := f.submit(model.Audience{All: true})
			// A crashed runner's lease expires a second after its last
			// checkpoint.
			a := f.start("a", width, nodeOptions{sendTimeout: timeoutHeld, lease: timeoutHeld})
			f.waitFor("the first chunk stored but the two sends in flight", func() bool {
				return f.broadcast(id).Succeeded == stored && f.fcm.entered.Load() >= stored+2
			})
			a.stop(t, tc.cause)
			rows, err := f.leases.Chunks(f.ctx(), id)
			if err != nil {
				t.Fatal(err)
			}
			// Stored: every target up to 12, and 15..30 done beyond the cursor.
			wantStatus := map[error]string{ErrShutdown: "pending", errLeaseLost: "leased"}[tc.cause]
			if c := rows[0]; c.Status != wantStatus || c.Cursor != 12 || !slices.Equal(c.Done, []lease.Range{{Lo: 15, Hi: width}}) {
				t.Fatalf("stopped mid-chunk, chunk 0 is %+v: want it %s at cursor 12 with 15..%d done", c, wantStatus, width)
			}
			if b := f.broadcast(id); b.Succeeded != stored || b.Failed != 0 || b.Canceled != 0 {
				t.Fatalf("after the stop: %+v stored, want the %d accepted sends and nothing else", b.Counts, stored)
			}
			attemptsByA, acceptedByA := f.fcm.counts()

			f.fcm.releaseHeld()
			b := f.start("b", width, nodeOptions{})
			final := f.waitFinal(id)
			b.stop(t, ErrShutdown)

			if final.Status != model.StatusCompleted || final.Succeeded != int64(len(users)) || final.Targeted != int64(len(users)) || final.Failed != 0 || final.Canceled != 0 {
				t.Fatalf("broadcast %s with %+v, want completed with all %d succeeded", final.Status, final.Counts, len(users))
			}
			// What a's checkpoint stored is never sent again; every other
			// target, those a had in flight included, b sends once.
			attempts, accepted := f.fcm.counts()
			resent := 0
			for _, u := range users {
				want := attemptsByA[u.token]
				if acceptedByA[u.token] == 0 {
					want++
				}
				if accepted[u.token] != 1 || attempts[u.token] != want {
					t.Errorf("%s: accepted %d times in %d attempts (%d by a), want once in %d", u.token, accepted[u.token], attempts[u.token], attemptsByA[u.token], want)
				}
				if attemptsByA[u.token] > 0 && acceptedByA[u.token] == 0 {
					resent++
				}
			}
			if resent != 2 {
				t.Fatalf("%d targets sent by both runners, want the 2 a had in flight", resent)
			}
			if s := final.Chunks; s == nil || s.Chunks != 3 || s.Takeovers != tc.takeovers || s.Claims != 4 {
				t.Fatalf("chunk summary %+v, want 3 chunks claimed 4 times, %d takeovers", s, tc.takeovers)
			}
			if got := b.metrics.claims; got[true] != tc.takeovers || got[false] != 3-tc.takeovers {
				t.Fatalf("b's claims by takeover: %v, want %d of its 3 a takeover", got, tc.takeovers)
			}
		})
	}
}

// A dry run (validate_only) counts dead tokens failed but leaves them
// valid, unless it asks to invalidate them (invalidate_on_dry_run); a
// real send after it targets only the tokens still valid.
func TestADryRunInvalidatesOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var users []user
	wantDead := map[string]string{}
	for id := uint64(1); id <= 25; id++ {
		u := user{id: id, token: fmt.Sprintf("ok-%d", id)}
		if id%5 == 0 {
			u.token = fmt.Sprintf("unregistered-%d", id)
			wantDead[u.token] = "UNREGISTERED"
		}
		users = append(users, u)
	}
	f.seed(users)
	var all []string
	for _, u := range users {
		all = append(all, u.token)
	}
	n := f.start("a", 10, nodeOptions{})
	dryRun := func(invalidate bool) func(*model.Broadcast) {
		return func(b *model.Broadcast) { b.DryRun, b.InvalidateOnDryRun = true, invalidate }
	}

	b := f.waitFinal(f.submit(model.Audience{All: true}, dryRun(false)))
	if b.Status != model.StatusCompleted || b.Succeeded != 20 || b.Failed != 5 || b.Invalidated != 0 {
		t.Fatalf("dry run: %s with %+v, want 20 succeeded, 5 failed, none invalidated", b.Status, b.Counts)
	}
	if got := f.invalidated(all); len(got) != 0 {
		t.Fatalf("a dry run invalidated %v", got)
	}
	b = f.waitFinal(f.submit(model.Audience{All: true}, dryRun(true)))
	if b.Failed != 5 || b.Invalidated != 5 {
		t.Fatalf("dry run with invalidate_on_dry_run: %+v, want the 5 dead tokens invalidated", b.Counts)
	}
	if got := f.invalidated(all); !reflect.DeepEqual(got, wantDead) {
		t.Fatalf("invalidated %v, want %v", got, wantDead)
	}
	b = f.waitFinal(f.submit(model.Audience{All: true}))
	n.stop(t, ErrShutdown)
	if b.Targeted != 20 || b.Succeeded != 20 || b.Failed != 0 {
		t.Fatalf("the real send after them: %+v, want the 20 valid tokens only", b.Counts)
	}
	_, accepted := f.fcm.counts()
	for _, tk := range all {
		if want := map[bool]int{true: 1}[wantDead[tk] == ""]; accepted[tk] != want || f.fcm.validatedOf(tk) != 2*want {
			t.Errorf("%s: accepted %d, validated %d; want %d and %d", tk, accepted[tk], f.fcm.validatedOf(tk), want, 2*want)
		}
	}
}
