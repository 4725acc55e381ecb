package repository_test

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"pushfan/repository"
)

func TestBroadcastRoundTrip(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	before := time.Now().UTC().Add(-time.Second)
	b := &repository.Broadcast{
		DryRun:             true,
		InvalidateOnDryRun: true,
		Message: repository.Message{
			Title: "Ciao 👋", Body: "Grüße", Image: "https://example.com/a.png",
			Data: map[string]string{"deep_link": "app://x", "n": "1"},
		},
		Audience:  repository.Audience{UserIDs: []uint64{1, 2, 18446744073709551615}},
		RequestID: "req-1",
		CreatedBy: "admin@example.com",
	}
	if err := s.CreateBroadcast(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	if b.ID == 0 || b.Status != repository.StatusQueued {
		t.Fatalf("after create: id %d status %q", b.ID, b.Status)
	}
	if b.CreatedAt.Location() != time.UTC || b.CreatedAt.Before(before) || b.CreatedAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("created_at %v not a current UTC time", b.CreatedAt)
	}
	got, err := s.GetBroadcast(ctx(t), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *b
	want.Errors = map[string]int64{}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", *got, want)
	}
	if got.StartedAt != nil || got.FinishedAt != nil || got.Error != "" {
		t.Fatalf("fresh broadcast has times or error: %+v", got)
	}

	// A second one with defaults: all audience, no optional fields.
	b2 := &repository.Broadcast{Message: repository.Message{Title: "t"}, Audience: repository.Audience{All: true}}
	if err := s.CreateBroadcast(ctx(t), b2); err != nil {
		t.Fatal(err)
	}
	got2, err := s.GetBroadcast(ctx(t), b2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got2.ID <= b.ID || !got2.Audience.All || got2.Audience.UserIDs != nil || got2.Message.Data != nil || got2.CreatedBy != "" || got2.DryRun {
		t.Fatalf("defaults round trip: %+v", got2)
	}
}

func TestCreateBroadcastValidates(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	for _, b := range []*repository.Broadcast{
		{Status: "bogus", Audience: repository.Audience{All: true}},
		{Audience: repository.Audience{All: true, UserIDs: []uint64{1}}},
	} {
		if err := s.CreateBroadcast(ctx(t), b); err == nil || b.ID != 0 {
			t.Errorf("CreateBroadcast(%+v): want error, got id %d err %v", b, b.ID, err)
		}
	}
}

func TestGetBroadcastNotFound(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	_, err := s.GetBroadcast(ctx(t), 12345)
	if !errors.Is(err, repository.ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}
	for name, err := range map[string]error{
		"start":    s.StartBroadcast(ctx(t), 12345, time.Now()),
		"targeted": s.SetTargeted(ctx(t), 12345, 3),
		"progress": s.AddProgress(ctx(t), 12345, repository.Counts{Succeeded: 1}),
		"errors":   s.AddProgress(ctx(t), 12345, repository.Counts{Errors: map[string]int64{"X": 1}}),
	} {
		if !errors.Is(err, repository.ErrNotFound) {
			t.Errorf("%s: want ErrNotFound, got %v", name, err)
		}
	}
	if _, err := s.FinishBroadcast(ctx(t), 12345, repository.StatusCompleted, "", time.Now()); !errors.Is(err, repository.ErrNotFound) {
		t.Errorf("finish: want ErrNotFound, got %v", err)
	}
}

func TestBroadcastLifecycle(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	b := &repository.Broadcast{Message: repository.Message{Title: "t"}, Audience: repository.Audience{All: true}}
	if err := s.CreateBroadcast(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	// Times from any zone, with nanoseconds, come back as stored: UTC, µs.
	berlin := time.FixedZone("CEST", 2*3600)
	start := time.Date(2025, 6, 1, 12, 0, 0, 123456789, berlin)
	if err := s.StartBroadcast(ctx(t), b.ID, start); err != nil {
		t.Fatal(err)
	}
	// Starting again (a resumed run) keeps the first started_at.
	if err := s.StartBroadcast(ctx(t), b.ID, start.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTargeted(ctx(t), b.ID, 42); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTargeted(ctx(t), b.ID, 42); err != nil { // unchanged value is not "not found"
		t.Fatal(err)
	}
	got, err := s.GetBroadcast(ctx(t), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStart := time.Date(2025, 6, 1, 10, 0, 0, 123456000, time.UTC)
	if got.Status != repository.StatusRunning || got.StartedAt == nil || !got.StartedAt.Equal(wantStart) ||
		got.StartedAt.Location() != time.UTC || got.Targeted != 42 {
		t.Fatalf("after start: status %q started %v targeted %d", got.Status, got.StartedAt, got.Targeted)
	}

	end := start.Add(3 * time.Second)
	changed, err := s.FinishBroadcast(ctx(t), b.ID, repository.StatusFailed, "fcm: auth rejected", end)
	if err != nil || !changed {
		t.Fatalf("first finish: changed=%v err=%v", changed, err)
	}
	changed, err = s.FinishBroadcast(ctx(t), b.ID, repository.StatusCompleted, "", end.Add(time.Second))
	if err != nil || changed {
		t.Fatalf("second finish: changed=%v err=%v", changed, err)
	}
	got, err = s.GetBroadcast(ctx(t), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != repository.StatusFailed || got.Error != "fcm: auth rejected" || got.FinishedAt == nil ||
		!got.FinishedAt.Equal(wantStart.Add(3*time.Second)) {
		t.Fatalf("after finish: %+v", got)
	}
	if err := s.StartBroadcast(ctx(t), b.ID, time.Now()); !errors.Is(err, repository.ErrFinished) {
		t.Fatalf("start after finish: want ErrFinished, got %v", err)
	}
	if _, err := s.FinishBroadcast(ctx(t), b.ID, repository.StatusRunning, "", time.Now()); err == nil {
		t.Fatal("finish with non-final status: want error")
	}
}

func TestFinishBroadcastExactlyOneWinner(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	b := &repository.Broadcast{Audience: repository.Audience{All: true}}
	if err := s.CreateBroadcast(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for i := range 10 {
		wg.Go(func() {
			st := repository.StatusCompleted
			if i%2 == 0 {
				st = repository.StatusCanceled
			}
			changed, err := s.FinishBroadcast(ctx(t), b.ID, st, "", time.Now())
			if err != nil {
				t.Error(err)
			}
			if changed {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d finishers won, want exactly 1", wins)
	}
}

func TestAddProgressConcurrentExact(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	// Two broadcasts updated at once: their error-count upserts touch
	// neighbouring keys, which is where InnoDB gap-lock deadlocks come from.
	var ids []uint64
	for range 2 {
		b := &repository.Broadcast{Audience: repository.Audience{All: true}}
		if err := s.CreateBroadcast(ctx(t), b); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID)
	}
	const workers, calls = 20, 50
	codes := []string{"UNREGISTERED", "INTERNAL", "QUOTA_EXCEEDED", "timeout"}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for c := range calls {
				d := repository.Counts{
					Targeted: 1, Succeeded: 2, Failed: 3, Canceled: 1, Invalidated: 1,
					Errors: map[string]int64{codes[(w+c)%len(codes)]: 2, codes[(w+c+1)%len(codes)]: 1},
				}
				if err := s.AddProgress(ctx(t), ids[(w+c)%2], d); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var total repository.Counts
	total.Errors = map[string]int64{}
	for _, id := range ids {
		b, err := s.GetBroadcast(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for code, n := range b.Errors {
			total.Errors[code] += n
			sum += n
		}
		if sum != b.Failed {
			t.Errorf("broadcast %d: errors sum %d != failed %d", id, sum, b.Failed)
		}
		total.Targeted += b.Targeted
		total.Succeeded += b.Succeeded
		total.Failed += b.Failed
		total.Canceled += b.Canceled
		total.Invalidated += b.Invalidated
	}
	const n = workers * calls
	want := repository.Counts{Targeted: n, Succeeded: 2 * n, Failed: 3 * n, Canceled: n, Invalidated: n,
		Errors: map[string]int64{"UNREGISTERED": 3 * n / 4, "INTERNAL": 3 * n / 4, "QUOTA_EXCEEDED": 3 * n / 4, "timeout": 3 * n / 4}}
	if !reflect.DeepEqual(total, want) {
		t.Fatalf("totals:\n got %+v\nwant %+v", total, want)
	}
}

func TestAddProgressErrorsMapAndZeroDelta(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	b := &repository.Broadcast{Audience: repository.Audience{All: true}}
	if err := s.CreateBroadcast(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	steps := []repository.Counts{
		{Failed: 2, Errors: map[string]int64{"UNREGISTERED": 2}},
		{Errors: map[string]int64{"INTERNAL": 1}},                                     // codes only
		{Errors: map[string]int64{"unregistered": 1, "ZERO": 0, `we"ird\ código`: 1}}, // case matters; zero entries are no-ops; JSON-hostile codes survive
		{Succeeded: 5},
		{}, // no-op
	}
	for _, d := range steps {
		if err := s.AddProgress(ctx(t), b.ID, d); err != nil {
			t.Fatal(err)
		}
	}
	// A zero delta issues no query: even a missing broadcast is no error.
	if err := s.AddProgress(ctx(t), 999999, repository.Counts{Errors: map[string]int64{"X": 0}}); err != nil {
		t.Fatalf("zero delta: %v", err)
	}
	got, err := s.GetBroadcast(ctx(t), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"UNREGISTERED": 2, "INTERNAL": 1, "unregistered": 1, `we"ird\ código`: 1}
	if !reflect.DeepEqual(got.Errors, want) || got.Failed != 2 || got.Succeeded != 5 {
		t.Fatalf("got errors %v failed %d succeeded %d", got.Errors, got.Failed, got.Succeeded)
	}
}
