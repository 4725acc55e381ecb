package repository_test

import (
	"reflect"
	"testing"

	"pushfan/model"
)

func TestStatsExcludesDryRuns(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	empty, err := s.Stats(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(empty, model.Stats{Errors: map[string]int64{}}) {
		t.Fatalf("empty stats: %+v", empty)
	}

	add := func(dry bool, d model.Counts) {
		t.Helper()
		b := &model.Broadcast{Submission: model.Submission{DryRun: dry, Audience: model.Audience{All: true}}, Counts: d}
		if err := leases(s).Create(ctx(t), b); err != nil {
			t.Fatal(err)
		}
	}
	add(false, model.Counts{Targeted: 10, Succeeded: 7, Failed: 3, Invalidated: 2, Errors: map[string]int64{"UNREGISTERED": 2, "INTERNAL": 1}})
	add(false, model.Counts{Targeted: 5, Succeeded: 1, Failed: 1, Canceled: 3, Errors: map[string]int64{"UNREGISTERED": 1}})
	add(true, model.Counts{Targeted: 100, Succeeded: 50, Failed: 50, Invalidated: 9, Errors: map[string]int64{"UNREGISTERED": 40, "DRY_ONLY": 10}})
	add(true, model.Counts{})

	got, err := s.Stats(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := model.Stats{
		Broadcasts: 2, DryRuns: 2, Targeted: 15, Succeeded: 8, Failed: 4, Canceled: 3, InvalidatedTokens: 2,
		Errors: map[string]int64{"UNREGISTERED": 3, "INTERNAL": 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stats:\n got %+v\nwant %+v", got, want)
	}
}
