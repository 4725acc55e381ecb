package repository_test

import (
	"slices"
	"testing"

	"pushfan/internal/devtools/demo"
	"pushfan/model"
	"pushfan/repository"
)

// A plan reads the audience in token id order, page after page, with the
// users' zones when asked; a chunk with a target list reads its targets by
// id, skipping those no longer valid.
func TestPlanPagesFollowTheAudience(t *testing.T) {
	s := newStore(t)
	if _, _, err := demo.New(s.DB(), nil).SeedDemo(ctx(t), demo.SeedOptions{Users: 5000, TokensPerUserMax: 1}); err != nil {
		t.Fatal(err)
	}
	maxID, err := s.MaxTokenID(ctx(t), nil)
	if err != nil || maxID != 5000 {
		t.Fatalf("snapshot %d %v, want 5000", maxID, err)
	}
	exec(t, s, "UPDATE users SET push_enabled = 0 WHERE id = 1")
	exec(t, s, "UPDATE device_tokens SET invalidated_at = NOW(6) WHERE id = 3")
	exec(t, s, "UPDATE users SET timezone = 'Asia/Seoul' WHERE id = 4")
	var ids []uint64
	for uid := uint64(1); uid <= 10; uid++ {
		ids = append(ids, uid)
	}
	rows, err := s.PlanPage(ctx(t), nil, model.Audience{UserIDs: ids}, 0, maxID, 100, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, r := range rows {
		got = append(got, r.ID)
		if want := r.ID == 4; r.HasZone != want || (want && r.Zone != "Asia/Seoul") {
			t.Fatalf("token %d: zone %q (set %v)", r.ID, r.Zone, r.HasZone)
		}
	}
	if want := []uint64{2, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(got, want) {
		t.Fatalf("user_ids plan rows %v, want %v (user 1 disabled, token 3 dead)", got, want)
	}
	// all, in pages of 1000 from where the last ended: every valid target once.
	var n int
	var buf []repository.PlanRow
	for after := uint64(0); ; {
		if buf, err = s.PlanPage(ctx(t), nil, model.Audience{All: true}, after, maxID, 1000, false, buf); err != nil {
			t.Fatal(err)
		}
		for _, r := range buf {
			if r.ID <= after || r.HasZone {
				t.Fatalf("row %+v after %d (zones not asked for)", r, after)
			}
		}
		n += len(buf)
		if len(buf) < 1000 {
			break
		}
		after = buf[len(buf)-1].ID
	}
	if n != 4998 {
		t.Fatalf("all: %d targets, want 4998", n)
	}
	ts, err := s.TargetsByID(ctx(t), []uint64{1, 2, 3, 4, 4999}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, tg := range ts {
		got = append(got, tg.TokenID)
		if tg.Token == "" || tg.UserID != tg.TokenID {
			t.Fatalf("target %+v", tg)
		}
	}
	if want := []uint64{2, 4, 4999}; !slices.Equal(got, want) {
		t.Fatalf("targets by id %v, want %v", got, want)
	}
}
