package repository_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"pushfan/internal/testsupport/testdb"
	"pushfan/model"
	"pushfan/repository"
)

// appsWalkTokens is the shared table of the walk tests: one token per
// user, every 100th of app partner (3,000), the rest of app consumer
// (297,000), interleaved in id order as tokens registered over time are.
const (
	appsWalkTokens  = 300000
	appsWalkPartner = appsWalkTokens / 100
)

func appsWalkStore(t *testing.T) (*repository.Store, *testdb.RowsRead) {
	t.Helper()
	tdb := testdb.New(t)
	s := tdb.Store
	exec(t, s, fmt.Sprintf("INSERT INTO users (id) SELECT seq FROM seq_1_to_%d", appsWalkTokens))
	exec(t, s, fmt.Sprintf(`INSERT INTO device_tokens (user_id, token, app)
		SELECT seq, CONCAT('w-', seq), IF(seq %% 100 = 0, 'partner', 'consumer') FROM seq_1_to_%d`, appsWalkTokens))
	// The statistics a server has after its background recount; a test
	// that reads right after a bulk insert would otherwise race it.
	exec(t, s, "ANALYZE TABLE device_tokens")
	return s, testdb.NewRowsRead(t, tdb.SQL)
}

// A small app sharing device_tokens with a large one walks its own tokens
// only (idx_device_tokens_app, migration 00024): its whole audience, paged
// as a plan and as chunks page it, reads about its 3,000 rows of the
// 300,000, where the primary-key walk read them all. The large app keeps
// the primary-key walk, which reads each of its rows once with no second
// lookup: what a single-app deployment reads too.
func TestASmallAppsWalkReadsItsOwnTokensOnly(t *testing.T) {
	s, rr := appsWalkStore(t)
	c := ctx(t)
	all := model.Audience{All: true}
	partner, consumer := s.ForApp("partner"), s.ForApp("consumer")
	maxID, err := s.MaxTokenID(c, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The plan's walk: pages of the whole snapshot.
	var planned int
	read := rr.During(func() {
		var buf []repository.PlanRow
		for after := uint64(0); ; {
			if buf, err = partner.PlanPage(c, nil, all, after, maxID, 1000, false, buf); err != nil {
				t.Fatal(err)
			}
			planned += len(buf)
			if len(buf) < 1000 {
				break
			}
			after = buf[len(buf)-1].ID
		}
	}, "device_tokens")
	if planned != appsWalkPartner {
		t.Fatalf("partner's plan walk found %d targets, want %d", planned, appsWalkPartner)
	}
	if got := read["device_tokens"]; got > 2*appsWalkPartner {
		t.Fatalf("partner's plan walk read %d rows of device_tokens; want about its own %d (at most %d), not the table's %d",
			got, appsWalkPartner, 2*appsWalkPartner, appsWalkTokens)
	}
	t.Logf("partner's plan walk: %d targets, %d rows read", planned, read["device_tokens"])

	// The chunks' walk: 30 ranges of 10,000 ids, each paged by 500.
	var sent []repository.Target
	read = rr.During(func() {
		var buf []repository.Target
		width := (maxID + 29) / 30
		for lo := uint64(0); lo < maxID; lo += width {
			for after := lo; ; {
				if buf, err = partner.AudiencePage(c, all, after, min(lo+width, maxID), 500, buf); err != nil {
					t.Fatal(err)
				}
				sent = append(sent, buf...)
				if len(buf) < 500 {
					break
				}
				after = buf[len(buf)-1].TokenID
			}
		}
	}, "device_tokens")
	if len(sent) != appsWalkPartner {
		t.Fatalf("partner's chunks paged %d targets, want %d", len(sent), appsWalkPartner)
	}
	for i, tg := range sent {
		n, _ := strconv.Atoi(strings.TrimPrefix(tg.Token, "w-"))
		if n%100 != 0 || (i > 0 && tg.TokenID <= sent[i-1].TokenID) {
			t.Fatalf("target %d is %+v: want partner's tokens only (w-<multiple of 100>), in id order", i, tg)
		}
	}
	if got := read["device_tokens"]; got > 2*appsWalkPartner {
		t.Fatalf("partner's chunk pages read %d rows of device_tokens; want about its own %d (at most %d), not the table's %d",
			got, appsWalkPartner, 2*appsWalkPartner, appsWalkTokens)
	}
	t.Logf("partner's chunk pages: %d targets, %d rows read", len(sent), read["device_tokens"])

	// Which index each app's pages walk, as MariaDB plans them: partner's
	// (1 % of the table) its own range of the app index, consumer's (99 %)
	// the primary key, however its statistics would weigh them.
	for _, w := range []struct {
		name        string
		store       *repository.Store
		after, upto uint64
		want        string
	}{
		{"partner", partner, 0, maxID, "idx_device_tokens_app"},
		{"partner", partner, maxID / 2, maxID, "idx_device_tokens_app"},
		{"partner", partner, maxID / 2, maxID/2 + 10000, "idx_device_tokens_app"},
		{"consumer", consumer, 0, maxID, "PRIMARY"},
		{"consumer", consumer, maxID / 2, maxID, "PRIMARY"},
		{"consumer", consumer, maxID / 2, maxID/2 + 10000, "PRIMARY"},
	} {
		key, err := w.store.AudiencePageIndex(c, all, w.after, w.upto, 500)
		if err != nil {
			t.Fatal(err)
		}
		if key != w.want {
			t.Fatalf("%s's audience page over (%d, %d] walks %q, want %q", w.name, w.after, w.upto, key, w.want)
		}
	}

	// An app with no token in the table reads none of the others'.
	read = rr.During(func() {
		if buf, err := s.ForApp(model.DefaultApp).AudiencePage(c, all, 0, maxID, 500, nil); err != nil || len(buf) != 0 {
			t.Fatalf("the default app's page: %d targets, %v; want none", len(buf), err)
		}
	}, "device_tokens")
	if got := read["device_tokens"]; got > 1 {
		t.Fatalf("a page of an app without tokens read %d rows of device_tokens, want none", got)
	}
}

// The walk of a deployment with one app, whose tokens are the whole table,
// is the primary key's, as before migration 00024.
func TestASingleAppsWalkKeepsThePrimaryKey(t *testing.T) {
	tdb := testdb.New(t)
	s := tdb.Store
	exec(t, s, "INSERT INTO users (id) SELECT seq FROM seq_1_to_50000")
	exec(t, s, "INSERT INTO device_tokens (user_id, token) SELECT seq, CONCAT('s-', seq) FROM seq_1_to_50000")
	exec(t, s, "ANALYZE TABLE device_tokens")
	c := ctx(t)
	for _, r := range [][2]uint64{{0, 50000}, {10000, 12000}, {25000, 50000}, {49000, 50000}} {
		key, err := s.ForApp(model.DefaultApp).AudiencePageIndex(c, model.Audience{All: true}, r[0], r[1], 500)
		if err != nil {
			t.Fatal(err)
		}
		if key != "PRIMARY" {
			t.Fatalf("the one app's page over (%d, %d] walks %q, want PRIMARY", r[0], r[1], key)
		}
	}
}

// Without the app index (a database before migration 00024) the share
// cannot be estimated: the walk leaves the choice to the optimizer and
// still reads every target of the app, once.
func TestAWalkWithoutTheAppIndexStillReadsItsApp(t *testing.T) {
	tdb := testdb.NewAt(t, 23)
	s := tdb.Store
	exec(t, s, "INSERT INTO users (id) SELECT seq FROM seq_1_to_2000")
	exec(t, s, "INSERT INTO device_tokens (user_id, token, app) SELECT seq, CONCAT('n-', seq), IF(seq % 4 = 0, 'partner', 'default') FROM seq_1_to_2000")
	c := ctx(t)
	partner := s.ForApp("partner")
	for round := range 2 { // the second within the retry delay: no estimate tried, the same walk
		got, err := partner.AudiencePage(c, model.Audience{All: true}, 0, 2000, 1000, nil)
		if err != nil || len(got) != 500 {
			t.Fatalf("round %d: partner's page without the app index: %d targets, %v; want its 500", round, len(got), err)
		}
		for _, tg := range got {
			if n, _ := strconv.Atoi(strings.TrimPrefix(tg.Token, "n-")); n%4 != 0 {
				t.Fatalf("round %d: %+v is not partner's", round, tg)
			}
		}
	}
}
