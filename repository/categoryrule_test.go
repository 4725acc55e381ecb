package repository_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"pushfan/model"
	"pushfan/repository"
)

var adTable = model.Category{Name: "advertising", Consent: model.ConsentTable,
	Night: &model.NightRule{Window: model.QuietHours{Start: "21:00", End: "08:00"}, Consent: model.ConsentTable}}

// A category's consent is part of the audience rule of every read of its
// broadcasts' audience, beside the stale rule: on staleFixture's users,
// every third consented (a row granted), every sixth at night too, every
// fifth has a row that says no. The counts, a send's pages and a chunk's
// target list keep the fresh consenting ones; a plan's page reads every
// fresh one with its consent state, to count those it leaves out; a
// named audience's users are looked up by id; a category without
// consent leaves the rule as it was.
func TestACategorysConsentIsPartOfTheAudienceRule(t *testing.T) {
	t.Parallel()
	plain := newStore(t)
	fresh, staleN := staleFixture(t, plain)
	exec(t, plain, `INSERT INTO user_consents (user_id, category, granted, night, updated_at, changed_at)
		SELECT seq, 'advertising', seq % 3 = 0, seq % 6 = 0, NOW(6), NOW(6) FROM seq_1_to_2000 WHERE seq % 3 = 0 OR seq % 5 = 0`)
	exec(t, plain, `INSERT INTO user_consents (user_id, category, granted, night, updated_at, changed_at)
		SELECT seq, 'other', 1, 1, NOW(6), NOW(6) FROM seq_1_to_2000`) // another category's consent counts for nothing here
	s := withStale(t, plain).ForCategory(&adTable)
	var kept []uint64
	for _, id := range fresh {
		if id%3 == 0 {
			kept = append(kept, id)
		}
	}
	all := model.Audience{All: true}

	count, stale, noConsent, err := s.CountAudienceExcluded(ctx(t), all)
	if err != nil || count != int64(len(kept)) || stale != int64(staleN) || noConsent != int64(len(fresh)-len(kept)) {
		t.Fatalf("CountAudienceExcluded = %d, %d, %d (%v); want %d, %d, %d", count, stale, noConsent, err, len(kept), staleN, len(fresh)-len(kept))
	}
	if n, err := s.CountAudience(ctx(t), all); err != nil || n != int64(len(kept)) {
		t.Fatalf("CountAudience = %d (%v), want %d", n, err, len(kept))
	}
	// The users of the kept targets: the stale and the refusing left out too.
	if n, err := s.CountAudienceUsers(ctx(t), all); err != nil || n != int64(len(kept)) {
		t.Fatalf("CountAudienceUsers = %d (%v), want %d", n, err, len(kept))
	}
	var got []uint64
	for after := uint64(0); ; {
		page, _, err := s.AudiencePageStale(ctx(t), all, after, math.MaxUint64, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, targetIDs(page)...)
		if len(page) < 100 {
			break
		}
		after = page[len(page)-1].TokenID
	}
	if !slices.Equal(got, kept) {
		t.Fatalf("send pages: %d targets, want %d", len(got), len(kept))
	}
	// The consent is one lookup of user_consents by its primary key per
	// target, beside the walk of the tokens' and the users' primary keys.
	access, err := s.AudiencePageAccess(ctx(t), all, 0, math.MaxUint64, 100)
	if err != nil || !strings.HasPrefix(access["t"], "range PRIMARY") || !strings.HasPrefix(access["u"], "eq_ref PRIMARY") || !strings.HasPrefix(access["c"], "eq_ref PRIMARY") {
		t.Fatalf("the send page's plan: %v (%v); want t a range of PRIMARY, u and c each one row by PRIMARY (eq_ref)", access, err)
	}
	byID, _, err := s.TargetsByIDStale(ctx(t), []uint64{3, 4, 5, 6, 9}, nil)
	if ids := targetIDs(byID); err != nil || !slices.Equal(ids, []uint64{3, 6, 9}) {
		t.Fatalf("TargetsByIDStale: %v (%v), want [3 6 9]", ids, err)
	}
	rows, err := s.PlanPage(ctx(t), nil, all, 0, math.MaxUint64, 5000, true, nil)
	if err != nil || len(rows) != len(fresh) {
		t.Fatalf("PlanPage: %d rows (%v), want every fresh one, %d", len(rows), err, len(fresh))
	}
	for _, r := range rows {
		want := uint8(0)
		if r.ID%3 == 0 {
			want = repository.ConsentDay
		}
		if r.ID%6 == 0 {
			want |= repository.ConsentNight
		}
		if r.Consent != want {
			t.Fatalf("PlanPage row %d: consent %d, want %d", r.ID, r.Consent, want)
		}
	}
	states, err := s.UserConsents(ctx(t), []uint64{1, 3, 5, 6, 99999})
	if err != nil || len(states) != 4 || states[1] != 0 || states[3] != repository.ConsentDay || states[5] != 0 || states[6] != repository.ConsentDay|repository.ConsentNight {
		t.Fatalf("UserConsents: %v (%v)", states, err)
	}

	// No consent asked: the rule is push_enabled's alone, and every user
	// may be sent to, by day and by night.
	service := withStale(t, plain).ForCategory(&model.Category{Name: "service"})
	if n, _, nc, err := service.CountAudienceExcluded(ctx(t), all); err != nil || n != int64(len(fresh)) || nc != 0 {
		t.Fatalf("service: %d, %d excluded (%v); want %d, 0", n, nc, err, len(fresh))
	}
	if n, err := service.CountAudienceUsers(ctx(t), all); err != nil || n != int64(len(fresh)) {
		t.Fatalf("service: %d users (%v); want %d", n, err, len(fresh))
	}
	if st, err := service.UserConsents(ctx(t), []uint64{1}); err != nil || st[1] != repository.ConsentDay|repository.ConsentNight {
		t.Fatalf("service UserConsents: %v (%v)", st, err)
	}
}

// A consent written as an SQL condition on the users table, and a night
// window whose consent is none (nobody may be sent to inside it); a
// condition naming a column the table lacks fails the start-up check
// with its category named.
func TestAConsentConditionOnTheUsersTable(t *testing.T) {
	t.Parallel()
	plain := newStore(t)
	fresh, _ := staleFixture(t, plain)
	cat := model.Category{Name: "promo", Consent: "u.id % 4 = 0", Night: &model.NightRule{Window: model.QuietHours{Start: "21:00", End: "08:00"}}}
	s := withStale(t, plain).ForCategory(&cat)
	var want int64
	for _, id := range fresh {
		if id%4 == 0 {
			want++
		}
	}
	if n, _, nc, err := s.CountAudienceExcluded(ctx(t), model.Audience{All: true}); err != nil || n != want || nc != int64(len(fresh))-want {
		t.Fatalf("count: %d, %d excluded (%v); want %d, %d", n, nc, err, want, int64(len(fresh))-want)
	}
	if st, err := s.UserConsents(ctx(t), []uint64{4, 5}); err != nil || st[4] != repository.ConsentDay || st[5] != 0 {
		t.Fatalf("UserConsents: %v (%v): want 4 by day only, 5 not", st, err)
	}
	sc := repository.BundledSchema()
	if err := sc.CheckConsent(ctx(t), plain.DB(), cat); err != nil {
		t.Fatalf("a good condition: %v", err)
	}
	if err := sc.CheckConsent(ctx(t), plain.DB(), adTable); err != nil {
		t.Fatalf("the bundled table: %v", err)
	}
	bad := model.Category{Name: "promo", Consent: "u.ad_agree = 1"}
	if err := sc.CheckConsent(ctx(t), plain.DB(), bad); err == nil || !strings.Contains(err.Error(), "categories.promo") {
		t.Fatalf("a missing column: %v, want an error naming categories.promo", err)
	}
	badNight := model.Category{Name: "promo", Consent: model.ConsentTable, Night: &model.NightRule{Window: cat.Night.Window, Consent: "u.night_ok = 1"}}
	if err := sc.CheckConsent(ctx(t), plain.DB(), badNight); err == nil || !strings.Contains(err.Error(), "categories.promo") {
		t.Fatalf("a missing night column: %v, want an error naming categories.promo", err)
	}
}
