package repository_test

import (
	"math"
	"slices"
	"testing"

	"pushfan/internal/demo"
	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

func TestPlanBuiltinFollowsTheAudience(t *testing.T) {
	s := newStore(t)
	if _, _, err := demo.New(s.DB(), nil).SeedDemo(ctx(t), demo.SeedOptions{Users: 5000, TokensPerUserMax: 1}); err != nil {
		t.Fatal(err)
	}
	db := s.DB()
	// user_ids: every 2nd of users 1..4999 = 2,500 targets, cut every 1000.
	var ids []uint64
	for uid := uint64(1); uid < 5000; uid += 2 {
		ids = append(ids, uid)
	}
	exec(t, s, "UPDATE users SET push_enabled = 0 WHERE id = 1") // the first id is not a target
	plans, maxID, err := repository.PlanBuiltin(ctx(t), db, model.Audience{UserIDs: ids}, 1000, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []lease.Plan{{Lo: 2, Hi: 2001, Targets: 1000}, {Lo: 2001, Hi: 4001, Targets: 1000}, {Lo: 4001, Hi: 4999, Targets: 499}}
	if maxID != 5000 || !slices.Equal(plans, want) {
		t.Fatalf("user_ids plan %+v (max %d), want %+v", plans, maxID, want)
	}
	// Three users: one chunk around their tokens only.
	plans, _, err = repository.PlanBuiltin(ctx(t), db, model.Audience{UserIDs: []uint64{10, 2500, 4000}}, 1000, 100)
	if err != nil || !slices.Equal(plans, []lease.Plan{{Lo: 9, Hi: 4000, Targets: 3}}) {
		t.Fatalf("3-user plan %+v %v", plans, err)
	}
	if plans, _, err = repository.PlanBuiltin(ctx(t), db, model.Audience{UserIDs: []uint64{999999}}, 1000, 100); err != nil || len(plans) != 0 {
		t.Fatalf("nobody: %+v %v", plans, err)
	}
	// all: from the lowest live token, 1000 ids a chunk, at most 3 chunks.
	exec(t, s, "UPDATE device_tokens SET invalidated_at = NOW(6) WHERE id <= 1200")
	plans, _, err = repository.PlanBuiltin(ctx(t), db, model.Audience{All: true}, 1000, 3)
	if err != nil || !slices.Equal(plans, []lease.Plan{{Lo: 1200, Hi: 2467, Targets: -1}, {Lo: 2467, Hi: 3734, Targets: -1}, {Lo: 3734, Hi: 5000, Targets: -1}}) {
		t.Fatalf("all plan %+v %v", plans, err)
	}
	bounds := []uint64{plans[0].Lo, plans[0].Hi, plans[1].Hi, plans[2].Hi}
	counts, err := s.CountChunks(ctx(t), model.Audience{All: true}, bounds)
	if err != nil || !slices.Equal(counts, []int64{1267, 1267, 1266}) {
		t.Fatalf("counts %v %v", counts, err)
	}
	if got := repository.SplitRange(0, math.MaxUint64, 1000, 4); len(got) != 4 || got[3].Hi != math.MaxUint64 {
		t.Fatalf("split of the whole cursor space: %+v", got)
	}
}
