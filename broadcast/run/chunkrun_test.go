package run

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pushfan/audience"
	"pushfan/model"
)

// population is users 1..n: every 10th with pushes off and every 41st
// with its token invalidated before (neither a target), and tokens that
// FCM answers UNREGISTERED (every 37th), INVALID_ARGUMENT (every 53rd)
// or UNAVAILABLE every time (every 29th); the rest are accepted.
func population(n int) []user {
	us := make([]user, n)
	for i := range us {
		id := uint64(i + 1)
		u := user{id: id, token: fmt.Sprintf("ok-%d", id), off: id%10 == 0, invalid: id%41 == 0}
		switch {
		case id%37 == 0:
			u.token = fmt.Sprintf("unregistered-%d", id)
		case id%53 == 0:
			u.token = fmt.Sprintf("invalid-%d", id)
		case id%29 == 0:
			u.token = fmt.Sprintf("unavailable-%d", id)
		}
		us[i] = u
	}
	return us
}

// codeOf is the code FCM answers token with ("" when it accepts it), and
// whether that code invalidates it.
func codeOf(token string) (code string, dead bool) {
	switch {
	case strings.HasPrefix(token, "unregistered-"):
		return "UNREGISTERED", true
	case strings.HasPrefix(token, "invalid-"):
		return "INVALID_ARGUMENT", true
	case strings.HasPrefix(token, "unavailable-"):
		return "UNAVAILABLE", false
	}
	return "", false
}

// A planned broadcast's chunks run to completion: every target is sent
// once (a token that keeps failing transiently, maxAttempts times), no
// other token is; each outcome is counted by its code, dead tokens are
// invalidated and failing ones are not; and the broadcast ends completed
// with counters equal to the sum of its chunks' stored checkpoints.
func TestAPlannedBroadcastRunsToCompletion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	users := population(230)
	f.seed(users)
	id := f.submit(model.Audience{All: true})
	const width = 50
	n := f.start("a", width, nodeOptions{chunkParallel: 2})
	b := f.waitFinal(id)
	n.stop(t, ErrShutdown) // every goroutine of the runs has ended: nothing is left to count

	want := model.Counts{Errors: map[string]int64{}}
	wantDead := map[string]string{}
	var sentTo []string
	for _, u := range users {
		if !u.target() {
			continue
		}
		want.Targeted++
		sentTo = append(sentTo, u.token)
		code, dead := codeOf(u.token)
		switch {
		case code == "":
			want.Succeeded++
		default:
			want.Failed++
			want.Errors[code]++
		}
		if dead {
			want.Invalidated++
			wantDead[u.token] = code
		}
	}
	if want.Errors["UNREGISTERED"] == 0 || want.Errors["INVALID_ARGUMENT"] == 0 || want.Errors["UNAVAILABLE"] == 0 {
		t.Fatalf("the population fails by %v: a code is missing, the test would prove nothing", want.Errors)
	}
	got := b.Counts
	got.Variants = nil
	if b.Status != model.StatusCompleted || !reflect.DeepEqual(got, want) {
		t.Fatalf("broadcast %s with %+v, want completed with %+v", b.Status, got, want)
	}

	// What FCM was sent, token by token.
	attempts, accepted := f.fcm.counts()
	for _, u := range users {
		code, _ := codeOf(u.token)
		wantAttempts, wantAccepted := 0, 0
		switch {
		case !u.target():
		case code == "UNAVAILABLE":
			wantAttempts = maxAttempts
		case code != "":
			wantAttempts = 1
		default:
			wantAttempts, wantAccepted = 1, 1
		}
		if attempts[u.token] != wantAttempts || accepted[u.token] != wantAccepted {
			t.Errorf("%s (target %v): %d attempts, %d accepted; want %d and %d", u.token, u.target(), attempts[u.token], accepted[u.token], wantAttempts, wantAccepted)
		}
	}

	// Dead tokens are invalidated with their code; a transient failure is
	// not.
	if got := f.invalidated(sentTo); !reflect.DeepEqual(got, wantDead) {
		t.Fatalf("invalidated %v, want %v", got, wantDead)
	}
	// The broadcast's counters are its chunks' checkpoints, added up.
	committed := n.metrics.committed()
	committed.Targeted = committed.Succeeded + committed.Failed + committed.Canceled
	if !reflect.DeepEqual(committed, want) {
		t.Fatalf("the stored checkpoints add up to %+v, want %+v", committed, want)
	}
	chunks := int((want.Targeted + width - 1) / width)
	if s := b.Chunks; s == nil || s.Chunks != chunks || s.Claims != chunks || s.Takeovers != 0 || !maps.Equal(s.DoneBy, map[string]int{"a": chunks}) {
		t.Fatalf("chunk summary %+v, want %d chunks each claimed once and done by a", s, chunks)
	}
	if n.metrics.finished[0] != string(model.StatusCompleted) || len(n.metrics.finished) != 1 {
		t.Fatalf("finished %v, want one completed", n.metrics.finished)
	}
}

// A cancel while a chunk runs stops it at its next checkpoint: the sends
// in flight end, every target it did not send and every chunk not yet
// run is counted canceled, and nothing is sent once the broadcast is
// final.
func TestACancelMidRunCountsTheRestCanceled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var users []user
	for id := uint64(1); id <= 120; id++ {
		users = append(users, user{id: id, token: fmt.Sprintf("ok-%d", id)})
	}
	f.seed(users)
	// 10 sends go; the next ones hang until their send timeout, which
	// the cancel outlives: they end canceled, never accepted.
	const pass = 10
	f.fcm.holdAfter(pass)
	id := f.submit(model.Audience{All: true})
	n := f.start("a", 40, nodeOptions{sendTimeout: timeoutHeld})
	f.waitFor("the first sends stored and more in flight", func() bool {
		return f.broadcast(id).Succeeded == pass && f.fcm.entered.Load() > pass
	})
	if got := f.chunkStatuses(id); !reflect.DeepEqual(got, []string{"leased", "pending", "pending"}) {
		t.Fatalf("chunks %v mid-run, want the first leased and two pending", got)
	}

	// As broadcast.Service.Cancel does.
	if _, err := f.leases.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	n.runner.Finish(f.ctx(), id)
	n.runner.Poke()
	b := f.waitFinal(id)
	sentAtFinal := f.fcm.entered.Load()
	n.stop(t, ErrShutdown)

	if b.Status != model.StatusCanceled || b.Succeeded != pass || b.Canceled != int64(len(users))-pass || b.Failed != 0 || b.Targeted != int64(len(users)) {
		t.Fatalf("broadcast %s with %+v, want canceled with %d succeeded and %d canceled", b.Status, b.Counts, pass, len(users)-pass)
	}
	if sent := f.fcm.entered.Load(); sent != sentAtFinal {
		t.Fatalf("%d sends after the broadcast was final", sent-sentAtFinal)
	}
	attempts, accepted := f.fcm.counts()
	var total int
	for _, n := range accepted {
		total += n
	}
	if total != pass {
		t.Fatalf("%d sends accepted, %d counted succeeded", total, pass)
	}
	for _, u := range users[40:] {
		if attempts[u.token] != 0 {
			t.Fatalf("%s of a chunk never claimed was sent %d times", u.token, attempts[u.token])
		}
	}
	if s := b.Chunks; s == nil || s.Chunks != 3 || s.Claims != 1 || s.DoneBy["canceled"] != 2 {
		t.Fatalf("chunk summary %+v, want 3 chunks, 1 claimed, 2 closed by the cancel", s)
	}
}

// An answer every token would get (FCM refusing the credential) fails
// the broadcast: its run stops, the token that got it is counted failed
// with its code, the targets not sent and the chunks not run are counted
// canceled, and the broadcast ends failed with the reason.
func TestAFatalAnswerFailsTheBroadcast(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var users []user
	for id := uint64(1); id <= 60; id++ {
		users = append(users, user{id: id, token: fmt.Sprintf("ok-%d", id)})
	}
	users[14].token = "auth-15"
	f.seed(users)
	id := f.submit(model.Audience{All: true})
	n := f.start("a", 20, nodeOptions{})
	b := f.waitFinal(id)
	n.stop(t, ErrShutdown)

	attempts, accepted := f.fcm.counts()
	if b.Status != model.StatusFailed || b.Error == "" || !strings.Contains(b.Error, "THIRD_PARTY_AUTH_ERROR") {
		t.Fatalf("broadcast %s (error %q), want failed naming THIRD_PARTY_AUTH_ERROR", b.Status, b.Error)
	}
	if b.Failed != 1 || b.Errors["THIRD_PARTY_AUTH_ERROR"] != 1 || b.Succeeded != int64(len(accepted)) ||
		b.Succeeded+b.Failed+b.Canceled != int64(len(users)) || b.Canceled < 40 {
		t.Fatalf("broadcast %+v: want the fatal answer failed, every accepted send succeeded, the rest (both other chunks at least) canceled", b.Counts)
	}
	for _, u := range users[20:] {
		if attempts[u.token] != 0 {
			t.Fatalf("%s of a chunk after the fatal answer was sent", u.token)
		}
	}
}

// newSegment is a named audience of every token, by token id.
var newSegment = audience.Definition{Name: "new_segment",
	SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after AND t.id <= :upto ORDER BY t.id LIMIT :limit"}

// A chunk this instance cannot run (its broadcast's named audience is
// not in its configuration: a rolling deploy) is handed back, and the
// instance leaves the broadcast to others a while; an instance that has
// the audience runs every chunk. When no instance can run it for the
// hand-back timeout, the broadcast fails with the reason, its targets
// counted canceled.
func TestAChunkThisInstanceCannotRunIsHandedBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var users []user
	for id := uint64(1); id <= 30; id++ {
		users = append(users, user{id: id, token: fmt.Sprintf("ok-%d", id)})
	}
	f.seed(users)
	id := f.submitPlanned(model.Audience{Name: newSegment.Name}, 10, 30)
	older := f.start("older", 10, nodeOptions{})
	f.waitFor("the older instance to hand a chunk back", func() bool {
		rows, err := f.leases.Chunks(f.ctx(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Refusal != "" {
				if r.Status != "pending" || !strings.Contains(r.Refusal, `"new_segment" is not configured`) {
					t.Fatalf("handed back: %+v, want pending with the reason", r)
				}
				return true
			}
		}
		return false
	})
	if refused := older.runner.Refused(); !slices.Equal(refused, []uint64{id}) {
		t.Fatalf("the older instance refuses %v, want the broadcast", refused)
	}
	newer := f.start("newer", 10, nodeOptions{audiences: []audience.Definition{newSegment}})
	b := f.waitFinal(id)
	newer.stop(t, ErrShutdown)
	older.stop(t, ErrShutdown)
	if b.Status != model.StatusCompleted || b.Succeeded != 30 || b.Targeted != 30 {
		t.Fatalf("broadcast %s with %+v, want completed with 30 succeeded", b.Status, b.Counts)
	}
	if s := b.Chunks; s == nil || !maps.Equal(s.DoneBy, map[string]int{"newer": 3}) || s.Claims != 4 {
		t.Fatalf("chunk summary %+v: want the 3 chunks done by the newer instance, claimed 4 times", s)
	}
	_, accepted := f.fcm.counts()
	for _, u := range users {
		if accepted[u.token] != 1 {
			t.Fatalf("%s accepted %d times, want once", u.token, accepted[u.token])
		}
	}

	ghost := f.submitPlanned(model.Audience{Name: "ghost_segment"}, 10, 30)
	lone := f.start("lone", 10, nodeOptions{audiences: []audience.Definition{newSegment}, failHandedBack: true})
	b = f.waitFinal(ghost)
	lone.stop(t, ErrShutdown)
	if b.Status != model.StatusFailed || !strings.Contains(b.Error, `"ghost_segment"`) || b.Canceled != 30 || b.Succeeded != 0 {
		t.Fatalf("a broadcast no instance can run: %s (%q) with %+v, want failed naming the audience, its 30 targets canceled", b.Status, b.Error, b.Counts)
	}
}

// Two instances share one broadcast's chunks: each chunk is claimed by
// one of them, every target is sent exactly once, and the last chunk to
// end, on either, finishes the broadcast.
func TestTwoInstancesShareABroadcastsChunks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var users []user
	for id := uint64(1); id <= 90; id++ {
		users = append(users, user{id: id, token: fmt.Sprintf("ok-%d", id)})
	}
	f.seed(users)
	// a's one slot stays busy with the first chunk (one send hangs) until
	// b has run the other two.
	f.fcm.holdTokens("ok-5")
	id := f.submit(model.Audience{All: true})
	a := f.start("a", 30, nodeOptions{})
	f.waitFor("a's chunk sending", func() bool { return f.fcm.entered.Load() >= 30 })
	b := f.start("b", 30, nodeOptions{})
	f.waitFor("b's two chunks stored", func() bool { return f.broadcast(id).Succeeded == 89 })
	f.fcm.releaseHeld()
	final := f.waitFinal(id)
	a.stop(t, ErrShutdown)
	b.stop(t, ErrShutdown)

	if final.Status != model.StatusCompleted || final.Succeeded != 90 || final.Targeted != 90 {
		t.Fatalf("broadcast %s with %+v, want completed with 90 succeeded", final.Status, final.Counts)
	}
	if s := final.Chunks; s == nil || !maps.Equal(s.DoneBy, map[string]int{"a": 1, "b": 2}) || s.Claims != 3 {
		t.Fatalf("chunk summary %+v, want a's one chunk and b's two, each claimed once", s)
	}
	attempts, accepted := f.fcm.counts()
	for _, u := range users {
		if attempts[u.token] != 1 || accepted[u.token] != 1 {
			t.Fatalf("%s: %d attempts, %d accepted; want exactly one", u.token, attempts[u.token], accepted[u.token])
		}
	}
	if got := append(a.metrics.finished, b.metrics.finished...); !slices.Equal(got, []string{"completed"}) {
		t.Fatalf("finished %v, want the broadcast finished once", got)
	}
}
