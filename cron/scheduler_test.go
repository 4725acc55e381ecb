package cron_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"pushfan/cron"
)

// recorder is a Submitter that records the fires it gets.
type recorder struct {
	mu    sync.Mutex
	fires map[time.Time]int
	last  time.Time
	fired chan time.Time
}

func (r *recorder) FireJob(_ context.Context, _ *cron.Compiled, at time.Time) (uint64, bool, error) {
	r.mu.Lock()
	r.fires[at]++
	n := r.fires[at]
	r.mu.Unlock()
	select {
	case r.fired <- at:
	default:
	}
	return uint64(at.Unix()), n > 1, nil
}

func (r *recorder) LastFireTime(context.Context, string) (time.Time, error) { return r.last, nil }

func (r *recorder) RecordSkippedFires(context.Context, string, []time.Time, string) error { return nil }

// The scheduler fires an every-second job once per fire time; starting it
// twice changes nothing; Stop is safe twice and ends it.
func TestSchedulerLifecycle(t *testing.T) {
	jobs, err := cron.Compile([]cron.Job{{Name: "tick", Schedule: "*/1 * * * * *", Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{fires: map[time.Time]int{}, fired: make(chan time.Time, 16)}
	sc := cron.NewScheduler(jobs, rec, slog.New(slog.DiscardHandler))
	sc.Start(context.Background())
	sc.Start(context.Background()) // twice: one scheduler still
	for range 2 {
		select {
		case <-rec.fired:
		case <-time.After(5 * time.Second):
			t.Fatal("no fire within 5 s of an every-second job")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 2 {
		if err := sc.Stop(ctx); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for at, n := range rec.fires {
		if n != 1 || at.Nanosecond() != 0 {
			t.Fatalf("fire %v submitted %d times", at, n)
		}
	}
}

// Stop before Start leaves nothing to start.
func TestSchedulerStopBeforeStart(t *testing.T) {
	rec := &recorder{fires: map[time.Time]int{}, fired: make(chan time.Time, 1)}
	sc := cron.NewScheduler(nil, rec, slog.New(slog.DiscardHandler))
	if err := sc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	sc.Start(context.Background())
	if err := sc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
