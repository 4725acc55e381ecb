package repository_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"pushfan/model"
	"pushfan/repository"
)

func TestBroadcastRoundTrip(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	before := time.Now().UTC().Add(-time.Second)
	b := &model.Broadcast{
		Submission: model.Submission{
			DryRun:             true,
			InvalidateOnDryRun: true,
			Message: model.Message{
				Title: "Ciao 👋", Body: "Grüße", Image: "https://example.com/a.png",
				Data: map[string]string{"deep_link": "app://x", "n": "1"},
			},
			Audience:    model.Audience{UserIDs: []uint64{1, 2, 18446744073709551615}},
			RequestID:   "req-1",
			CreatedBy:   "admin@example.com",
			Class:       model.ClassBulk,
			MaxRate:     250.5,
			DeliverOver: 90*time.Second + 250*time.Millisecond,
			App:         "partner",
		},
	}
	if err := leases(s).Create(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	if b.ID == 0 || b.Status != model.StatusQueued {
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
	b2 := &model.Broadcast{Submission: model.Submission{Message: model.Message{Title: "t"}, Audience: model.Audience{All: true}}}
	if err := leases(s).Create(ctx(t), b2); err != nil {
		t.Fatal(err)
	}
	got2, err := s.GetBroadcast(ctx(t), b2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got2.ID <= b.ID || !got2.Audience.All || got2.Audience.UserIDs != nil || got2.Message.Data != nil || got2.CreatedBy != "" || got2.DryRun ||
		got2.Class != model.ClassBulk || got2.MaxRate != 0 || got2.DeliverOver != 0 {
		t.Fatalf("defaults round trip: %+v", got2)
	}
}

func TestCreateBroadcastValidates(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	for _, b := range []*model.Broadcast{
		{Submission: model.Submission{Audience: model.Audience{All: true}}, Status: "bogus"},
		{Submission: model.Submission{Audience: model.Audience{All: true, UserIDs: []uint64{1}}}},
	} {
		if err := leases(s).Create(ctx(t), b); err == nil || b.ID != 0 {
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
}
