package repository_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"pushfan/model"
	"pushfan/repository"
)

const staleAfter = 30 * 24 * time.Hour

// staleFixture seeds 2,000 users with a token each, token id = user id,
// refreshed by their id: every 7th 40 days ago (stale), ids 1201..1450 a
// run of 250 stale ones (pages of 100 left empty by the rule, which must
// read on), every 11th invalidated (stale or not), every 13th user
// disabled. It returns the ids the stale rule keeps, and how many valid
// tokens of enabled users it leaves out as stale.
func staleFixture(t *testing.T, s *repository.Store) (fresh []uint64, stale int) {
	t.Helper()
	const n = 2000
	isStale := func(i uint64) bool { return i%7 == 0 || (i > 1200 && i <= 1450) }
	exec(t, s, fmt.Sprintf("INSERT INTO users (id, push_enabled) SELECT seq, seq %% 13 <> 0 FROM seq_1_to_%d", n))
	exec(t, s, fmt.Sprintf(`INSERT INTO device_tokens (id, user_id, token, invalidated_at, updated_at)
		SELECT seq, seq, CONCAT('tok-', seq), IF(seq %% 11 = 0, NOW(6), NULL),
		IF(seq %% 7 = 0 OR seq BETWEEN 1201 AND 1450, NOW(6) - INTERVAL 40 DAY, NOW(6) - INTERVAL 29 DAY) FROM seq_1_to_%d`, n))
	for i := uint64(1); i <= n; i++ {
		if i%11 == 0 || i%13 == 0 {
			continue // invalidated, or its user disabled: left out either way
		}
		if isStale(i) {
			stale++
		} else {
			fresh = append(fresh, i)
		}
	}
	return fresh, stale
}

// withStale is s reading the bundled tables under PUSHFAN_STALE_AFTER.
func withStale(t *testing.T, s *repository.Store) *repository.Store {
	t.Helper()
	sc, err := repository.BundledSchema().WithStaleAfter(staleAfter)
	if err != nil {
		t.Fatal(err)
	}
	return s.WithSchema(sc)
}

// The stale rule on the bundled tables: a send's pages (AudiencePageStale)
// yield exactly the fresh valid tokens of enabled users, full pages but
// the last even across a run of stale ones, and count each stale one
// once; the count, the plan's pages, a plan's target list, a test send's
// users and its raw tokens all read the same rule; invalidated tokens
// stay out. Without the rule, the stale tokens are targets.
func TestStaleRuleLeavesStaleTokensOut(t *testing.T) {
	t.Parallel()
	plain := newStore(t)
	fresh, staleN := staleFixture(t, plain)
	s := withStale(t, plain)
	all := model.Audience{All: true}

	for _, limit := range []int{100, 1000} {
		var got []uint64
		var stale int
		var after uint64
		for {
			page, n, err := s.AudiencePageStale(ctx(t), all, after, math.MaxUint64, limit, nil)
			if err != nil {
				t.Fatal(err)
			}
			stale += n
			for _, tg := range page {
				got = append(got, tg.TokenID)
			}
			if len(page) < limit {
				break // the last page: every other one is full
			}
			after = page[len(page)-1].TokenID
		}
		if !slices.Equal(got, fresh) || stale != staleN {
			t.Fatalf("limit %d: paged %d targets, %d stale; want %d targets (%v...), %d stale", limit, len(got), stale, len(fresh), fresh[:5], staleN)
		}
	}
	count, stale, err := s.CountAudienceStale(ctx(t), all)
	if err != nil || count != int64(len(fresh)) || stale != int64(staleN) {
		t.Fatalf("CountAudienceStale = %d, %d (%v); want %d, %d", count, stale, err, len(fresh), staleN)
	}
	if n, err := s.CountAudience(ctx(t), all); err != nil || n != int64(len(fresh)) {
		t.Fatalf("CountAudience = %d (%v), want %d", n, err, len(fresh))
	}
	// Without the rule, every valid token of an enabled user is a target.
	if n, st, err := plain.CountAudienceStale(ctx(t), all); err != nil || n != int64(len(fresh)+staleN) || st != 0 {
		t.Fatalf("without the rule: %d, %d (%v); want %d, 0", n, st, err, len(fresh)+staleN)
	}

	// user_ids: 7 (stale), 8 and 9 (fresh), 11 (invalidated), 13 (disabled),
	// 1301 (stale run), 1460 (fresh).
	users := model.Audience{UserIDs: []uint64{7, 8, 9, 11, 13, 1301, 1460}}
	page, st, err := s.AudiencePageStale(ctx(t), users, 0, math.MaxUint64, 10, nil)
	if ids := targetIDs(page); err != nil || !slices.Equal(ids, []uint64{8, 9, 1460}) || st != 2 {
		t.Fatalf("user_ids: %v, %d stale (%v); want [8 9 1460], 2 stale", ids, st, err)
	}

	// A plan reads the rule (PlanPage); a chunk's target list fixed by a
	// plan made before a token went stale leaves it out at send time.
	rows, err := s.PlanPage(ctx(t), nil, all, 0, math.MaxUint64, 5000, false, nil)
	if err != nil || len(rows) != len(fresh) {
		t.Fatalf("PlanPage: %d rows (%v), want %d", len(rows), err, len(fresh))
	}
	byID, st, err := s.TargetsByIDStale(ctx(t), []uint64{6, 7, 8, 11, 14, 1201, 1451}, nil)
	if ids := targetIDs(byID); err != nil || !slices.Equal(ids, []uint64{6, 8, 1451}) || st != 3 {
		t.Fatalf("TargetsByIDStale: %v, %d stale (%v); want [6 8 1451], 3 stale", ids, st, err)
	}

	// A test send's users get their fresh tokens only; a raw token is
	// looked up with its state.
	tu, err := s.TestUsers(ctx(t), []uint64{7, 8})
	if err != nil || len(tu) != 2 || len(tu[0].Tokens) != 0 || len(tu[1].Tokens) != 1 {
		t.Fatalf("TestUsers: %+v (%v); want user 7 without tokens, user 8 with one", tu, err)
	}
	known, err := s.LookupTokens(ctx(t), []string{"tok-7", "tok-8", "tok-77"})
	if err != nil || !known["tok-7"].Stale || known["tok-8"].Stale || !known["tok-77"].Invalidated {
		t.Fatalf("LookupTokens: %+v (%v); want tok-7 stale, tok-8 not, tok-77 invalidated", known, err)
	}
	// A named audience's tokens are held to the rule by the token: an
	// unknown one is not stale.
	got, err := s.StaleTokens(ctx(t), []string{"tok-7", "tok-8", "tok-1300", "not-a-row"})
	if err != nil || len(got) != 2 || !got["tok-7"] || !got["tok-1300"] {
		t.Fatalf("StaleTokens: %v (%v); want tok-7 and tok-1300", got, err)
	}
	if got, err := plain.StaleTokens(ctx(t), []string{"tok-7"}); err != nil || got != nil {
		t.Fatalf("StaleTokens without the rule: %v (%v), want nil", got, err)
	}
}

func targetIDs(ts []repository.Target) []uint64 {
	var ids []uint64
	for _, t := range ts {
		ids = append(ids, t.TokenID)
	}
	return ids
}

// A mapped tokens table needs schema.tokens.last_seen for the rule: none
// is an error naming the key, a column that is not a date/time one fails
// the start-up check, and a NULL last_seen is no evidence the phone is
// gone (fresh).
func TestStaleRuleOnAMappedTable(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	exec(t, s, "CREATE TABLE members (member_id BIGINT UNSIGNED PRIMARY KEY, push_agree CHAR(1) NOT NULL DEFAULT 'Y')")
	exec(t, s, `CREATE TABLE push_devices (device_seq BIGINT UNSIGNED PRIMARY KEY, member_id BIGINT UNSIGNED NOT NULL,
		fcm_token VARCHAR(255) NOT NULL, deleted_yn CHAR(1) NOT NULL DEFAULT 'N', seen_at DATETIME NULL, seen_text VARCHAR(32) NULL)`)
	exec(t, s, "INSERT INTO members (member_id) SELECT seq FROM seq_1_to_4")
	exec(t, s, `INSERT INTO push_devices (device_seq, member_id, fcm_token, seen_at) VALUES
		(1, 1, 'dev-1', NOW() - INTERVAL 1 DAY), (2, 2, 'dev-2', NOW() - INTERVAL 31 DAY), (3, 3, 'dev-3', NULL), (4, 4, 'dev-4', NOW() - INTERVAL 300 DAY)`)
	mapping := func(lastSeen string) model.SchemaMapping {
		return model.SchemaMapping{
			Users: &model.UsersMapping{Table: "members", ID: "member_id", PushEnabled: "push_agree = 'Y'"},
			Tokens: &model.TokensMapping{Table: "push_devices", ID: "device_seq", UserID: "member_id", Token: "fcm_token",
				Valid: "deleted_yn = 'N'", LastSeen: lastSeen,
				OnDead: "UPDATE push_devices SET deleted_yn = 'Y' WHERE device_seq = :id"},
		}
	}
	sc, err := repository.CompileSchema(mapping(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.WithStaleAfter(staleAfter); err == nil || !strings.Contains(err.Error(), "schema.tokens.last_seen: required when PUSHFAN_STALE_AFTER is set") {
		t.Fatalf("no last_seen: %v, want an error naming schema.tokens.last_seen", err)
	}
	if same, err := sc.WithStaleAfter(0); err != nil || same != sc {
		t.Fatalf("off: %v, want the schema as it is", err)
	}
	for col, want := range map[string]string{
		"seen_text": "schema.tokens.last_seen: column seen_text of push_devices is varchar, not a date/time",
		"seen_on":   "schema.tokens.last_seen: column seen_on not found in push_devices",
	} {
		bad, err := repository.CompileSchema(mapping(col))
		if err == nil {
			bad, err = bad.WithStaleAfter(staleAfter)
		}
		if err == nil {
			err = bad.Check(ctx(t), s.DB())
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("last_seen %s: %v, want %q", col, err, want)
		}
	}
	sc, err = repository.CompileSchema(mapping("seen_at"))
	if err == nil {
		sc, err = sc.WithStaleAfter(staleAfter)
	}
	if err == nil {
		err = sc.Check(ctx(t), s.DB())
	}
	if err != nil {
		t.Fatal(err)
	}
	m := s.WithSchema(sc)
	count, stale, err := m.CountAudienceStale(ctx(t), model.Audience{All: true})
	if err != nil || count != 2 || stale != 2 {
		t.Fatalf("mapped: %d fresh, %d stale (%v); want 2 (dev-1, dev-3 without a time) and 2", count, stale, err)
	}
	page, st, err := m.AudiencePageStale(ctx(t), model.Audience{All: true}, 0, math.MaxUint64, 10, nil)
	if ids := targetIDs(page); err != nil || !slices.Equal(ids, []uint64{1, 3}) || st != 2 {
		t.Fatalf("mapped page: %v, %d stale (%v); want [1 3], 2", ids, st, err)
	}
}
