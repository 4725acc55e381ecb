package run

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"pushfan/model"
)

// A chunk of a local-time broadcast waits until its instant: a zone
// whose send_at_local has passed is sent at once, a zone due seconds
// later is sent once its chunk's instant has come by the database's
// clock (the promoter makes it pending), and a zone an hour away is not
// sent before a cancel, which counts it canceled.
func TestALocalTimeChunkWaitsForItsInstant(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// The zones' users are interleaved: each chunk's targets are its
	// list, not the range of ids it spans.
	zones := map[string][]uint64{
		"Etc/GMT-1": {1, 5},       // UTC+1: the instant there was an hour ago
		"UTC":       {2, 4, 6, 8}, // user 8 has no zone: the default, UTC
		"Etc/GMT+1": {3, 7},       // UTC-1: an hour from now
	}
	tokens := map[string][]string{}
	var users []user
	for zone, ids := range zones {
		for _, id := range ids {
			u := user{id: id, token: fmt.Sprintf("ok-%d", id), zone: zone}
			if id == 8 {
				u.zone = ""
			}
			users = append(users, u)
			tokens[zone] = append(tokens[zone], u.token)
		}
	}
	slices.SortFunc(users, func(a, b user) int { return int(a.id) - int(b.id) })
	f.seed(users)

	// The UTC users' instant: seconds from now, time for the plan to
	// store it as waiting. Only the database's clock makes it due.
	due := time.Now().UTC().Add(3 * time.Second).Truncate(time.Second)
	id := f.submit(model.Audience{All: true, Local: &model.LocalDelivery{At: due.Format("2006-01-02T15:04:05")}})
	n := f.start("a", 10, nodeOptions{})
	if b := f.waitPlanned(id); b.Targeted != 8 || b.Waiting != 6 {
		t.Fatalf("planned %+v, want 8 targeted and 6 waiting (the UTC zone waits only if its plan is stored before %v)", b.Counts, due)
	}

	f.waitFor("the zone whose time has passed sent", func() bool { return f.sentAll(tokens["Etc/GMT-1"]) })
	// With both later zones' chunks still waiting after the sends were
	// read, they were waiting when the sends were: no UTC target may have
	// been sent.
	attempts, _ := f.fcm.counts()
	if statuses := f.chunkStatuses(id); waitingChunks(statuses) == 2 {
		for _, tk := range tokens["UTC"] {
			if attempts[tk] != 0 {
				t.Fatalf("%s sent while its chunk waits (chunks %v)", tk, statuses)
			}
		}
	}

	f.waitFor("the UTC zone sent at its instant", func() bool { return f.sentAll(tokens["UTC"]) })
	for _, tk := range tokens["UTC"] {
		if at := f.fcm.firstAttempt(tk); at.Before(due) {
			t.Fatalf("%s sent at %v, before its instant %v", tk, at, due)
		}
	}
	f.waitFor("the UTC chunk's outcomes stored", func() bool { return f.broadcast(id).Succeeded == 6 })
	if b := f.broadcast(id); b.Status != model.StatusRunning || b.Waiting != 2 {
		t.Fatalf("%s with %+v, want running with 2 waiting", b.Status, b.Counts)
	}

	if _, err := f.leases.Stop(f.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	n.runner.Finish(f.ctx(), id)
	b := f.waitFinal(id)
	n.stop(t, ErrShutdown)
	if b.Status != model.StatusCanceled || b.Succeeded != 6 || b.Canceled != 2 || b.Failed != 0 || b.Waiting != 0 {
		t.Fatalf("canceled: %s with %+v, want 6 succeeded, 2 canceled, none waiting", b.Status, b.Counts)
	}
	attempts, accepted := f.fcm.counts()
	want := map[string]int{}
	for _, zone := range []string{"Etc/GMT-1", "UTC"} {
		for _, tk := range tokens[zone] {
			want[tk] = 1
		}
	}
	if !reflect.DeepEqual(attempts, want) || !reflect.DeepEqual(accepted, want) {
		t.Fatalf("sent %v, accepted %v: want each of the two due zones' tokens once, and none of the zone an hour away", attempts, accepted)
	}
}

// sentAll reports whether every one of tokens was accepted.
func (f *fixture) sentAll(tokens []string) bool {
	_, accepted := f.fcm.counts()
	for _, tk := range tokens {
		if accepted[tk] == 0 {
			return false
		}
	}
	return true
}

func waitingChunks(statuses []string) int {
	n := 0
	for _, s := range statuses {
		if s == "waiting" {
			n++
		}
	}
	return n
}
