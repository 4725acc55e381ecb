package repository_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"pushfan/model"
	"pushfan/repository"
)

// audienceFixture is a population exercising every branch of the audience
// rule, with each user's tokens spread out in id order so pages cut through
// users.
type audienceFixture struct {
	enabled map[uint64]bool     // users that exist → push_enabled
	tokens  []repository.Target // every token inserted, in id order
	invalid map[uint64]bool     // token ids invalidated
}

func seedAudienceFixture(t *testing.T, s *repository.Store) audienceFixture {
	t.Helper()
	f := audienceFixture{enabled: map[uint64]bool{}, invalid: map[uint64]bool{}}
	type pending struct {
		user uint64
		n    int
	}
	var toInsert []pending
	for u := uint64(1); u <= 40; u++ {
		on := u%4 != 0 // every 4th user disabled
		f.enabled[u] = on
		if on && u%3 == 0 {
			exec(t, s, "INSERT INTO users (id, locale) VALUES (?, ?)", u, localeOf(u))
		} else if on {
			exec(t, s, "INSERT INTO users (id) VALUES (?)", u) // push_enabled defaults to 1, locale to en
		} else {
			exec(t, s, "INSERT INTO users (id, push_enabled) VALUES (?, 0)", u)
		}
		for n := range int(u % 5) { // 0..4 tokens per user
			toInsert = append(toInsert, pending{u, n})
		}
	}
	// Tokens of a user with no users row: never targeted.
	toInsert = append(toInsert, pending{1000, 0}, pending{1000, 1})
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(toInsert), func(i, j int) { toInsert[i], toInsert[j] = toInsert[j], toInsert[i] })
	for i, p := range toInsert {
		tok := fmt.Sprintf("fixture-%d-%d", p.user, p.n)
		id := insertToken(t, s, p.user, tok)
		// The platform as apps write it, in any case or none: the page
		// names it as the sends are counted (android, ios, web, other).
		raw, plat := []any{"android", "iOS", "web", "windows", nil}[i%5], []string{"android", "ios", "web", "other", "other"}[i%5]
		exec(t, s, "UPDATE device_tokens SET platform = ? WHERE id = ?", raw, id)
		f.tokens = append(f.tokens, repository.Target{TokenID: id, UserID: p.user, Token: tok, Locale: localeOf(p.user), Platform: plat})
		if i%6 == 0 {
			f.invalid[id] = true
			exec(t, s, "UPDATE device_tokens SET invalidated_at = UTC_TIMESTAMP(6), invalid_reason = 'test' WHERE id = ?", id)
		}
	}
	return f
}

// localeOf is the fixture's users.locale: every third user's own, else the
// column's default. The page returns it with each target.
func localeOf(u uint64) string {
	if u%3 == 0 {
		return []string{"ko", "pt-BR", "ja_JP"}[u/3%3]
	}
	return "en"
}

// want applies the audience rule in Go.
func (f audienceFixture) want(a model.Audience) []repository.Target {
	in := func(u uint64) bool { return a.All || slices.Contains(a.UserIDs, u) }
	var out []repository.Target
	for _, tg := range f.tokens {
		if !f.invalid[tg.TokenID] && f.enabled[tg.UserID] && in(tg.UserID) {
			out = append(out, tg)
		}
	}
	return out
}

func TestAudienceRule(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	f := seedAudienceFixture(t, s)

	audiences := map[string]model.Audience{
		"all": {All: true},
		// 4 and 8 are disabled, 5/10/15 have no tokens (u%5==0), 1000 has
		// tokens but no user row, 5000 is unknown altogether; 3 is listed twice.
		"subset": {UserIDs: []uint64{3, 4, 5, 7, 8, 9, 10, 13, 14, 15, 19, 1000, 5000, 3}},
		"none":   {UserIDs: []uint64{4, 5000}},
		"empty":  {},
	}
	for name, a := range audiences {
		for _, limit := range []int{1, 3, 7, 1000} {
			t.Run(fmt.Sprintf("%s/limit=%d", name, limit), func(t *testing.T) {
				want := f.want(a)
				got := pageAll(t, s, a, limit)
				if !slices.Equal(got, want) {
					t.Fatalf("audience %+v: got %d targets\n%v\nwant %d\n%v", a, len(got), got, len(want), want)
				}
				if name == "all" && len(want) < 3*limit && limit < 10 {
					t.Fatalf("fixture too small to cross pages: %d targets", len(want))
				}
				n, err := s.CountAudience(ctx(t), a)
				if err != nil {
					t.Fatal(err)
				}
				if n != int64(len(got)) {
					t.Fatalf("CountAudience = %d, paging found %d", n, len(got))
				}
			})
		}
	}
}

func TestAudienceRejectsAmbiguousAndBadLimit(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	if _, err := s.AudiencePage(ctx(t), model.Audience{All: true, UserIDs: []uint64{1}}, 0, math.MaxUint64, 10, nil); err == nil {
		t.Fatal("all + user_ids: want error")
	}
	if _, err := s.CountAudience(ctx(t), model.Audience{All: true, UserIDs: []uint64{1}}); err == nil {
		t.Fatal("count all + user_ids: want error")
	}
	if _, err := s.AudiencePage(ctx(t), model.Audience{All: true}, 0, math.MaxUint64, 0, nil); err == nil {
		t.Fatal("limit 0: want error")
	}
}

func TestAudiencePageSkipsTokensInvalidatedMidway(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	exec(t, s, "INSERT INTO users (id) VALUES (1), (2)")
	var ids []uint64
	for i := range 10 {
		ids = append(ids, insertToken(t, s, uint64(1+i%2), fmt.Sprintf("mid-%d", i)))
	}
	a := model.Audience{All: true}
	first, err := s.AudiencePage(ctx(t), a, 0, math.MaxUint64, 4, nil)
	if err != nil || len(first) != 4 {
		t.Fatalf("first page: %v, %d targets", err, len(first))
	}
	// FCM reports two tokens of the next page dead while we are sending.
	n, err := s.InvalidateTokens(ctx(t), []repository.Invalidation{
		{TokenID: ids[5], Reason: "UNREGISTERED"}, {TokenID: ids[8], Reason: "UNREGISTERED"},
	}, time.Now())
	if err != nil || n != 2 {
		t.Fatalf("InvalidateTokens = %d, %v", n, err)
	}
	rest := pageAll(t, s, a, 4)
	var got []uint64
	for _, tg := range rest {
		if tg.TokenID > first[3].TokenID {
			got = append(got, tg.TokenID)
		}
	}
	want := []uint64{ids[4], ids[6], ids[7], ids[9]}
	if !slices.Equal(got, want) {
		t.Fatalf("after invalidation got %v, want %v", got, want)
	}
}
