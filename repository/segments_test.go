package repository_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"pushfan/model"
	"pushfan/repository"
)

func TestSegmentVersionsAndDelete(t *testing.T) {
	s := newStore(t)
	c := ctx(t)
	at := time.Date(2026, 12, 5, 10, 0, 0, 123456000, time.UTC)
	desc := "android users"
	f1 := json.RawMessage(`{"field":"platform","op":"eq","value":"android"}`)
	seg, err := s.CreateSegment(c, "android", repository.SegmentEdit{Description: &desc, Filter: f1, By: "alice", At: at})
	if err != nil {
		t.Fatal(err)
	}
	if seg.Version != 1 || seg.Description != desc || !seg.CreatedAt.Equal(at) || seg.CreatedBy != "alice" {
		t.Fatalf("created %+v", seg)
	}
	if _, err := s.CreateSegment(c, "android", repository.SegmentEdit{Filter: f1}); !errors.Is(err, repository.ErrSegmentExists) {
		t.Fatalf("a second live android: %v, want ErrSegmentExists", err)
	}

	// An update without a description keeps the current one.
	f2 := json.RawMessage(`{"field":"platform","op":"in","value":["android","ios"]}`)
	later := at.Add(time.Hour)
	seg, err = s.UpdateSegment(c, "android", repository.SegmentEdit{Filter: f2, By: "bob", At: later})
	if err != nil {
		t.Fatal(err)
	}
	if seg.Version != 2 || seg.Description != desc || !seg.UpdatedAt.Equal(later) || !seg.CreatedAt.Equal(at) || seg.CreatedBy != "bob" {
		t.Fatalf("updated %+v", seg)
	}
	if _, err := s.UpdateSegment(c, "nobody", repository.SegmentEdit{Filter: f2}); !errors.Is(err, repository.ErrNotFound) {
		t.Fatalf("update of an unknown segment: %v, want ErrNotFound", err)
	}

	got, err := s.Segment(c, "android")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || string(got.Filter) != string(f2) || !got.CreatedAt.Equal(at) || !got.UpdatedAt.Equal(later) || got.CreatedBy != "bob" {
		t.Fatalf("read %+v", got)
	}
	if len(got.Versions) != 2 || got.Versions[0].Version != 1 || got.Versions[0].CreatedBy != "alice" || got.Versions[1].Version != 2 ||
		got.Versions[1].Description != desc || !got.Versions[1].CreatedAt.Equal(later) || got.Versions[0].Filter != nil {
		t.Fatalf("versions %+v", got.Versions)
	}
	v1, err := s.SegmentVersion(c, "android", 1)
	if err != nil || string(v1.Filter) != string(f1) || v1.CreatedBy != "alice" {
		t.Fatalf("version 1: %+v, %v", v1, err)
	}
	if _, err := s.SegmentVersion(c, "android", 3); !errors.Is(err, repository.ErrNotFound) {
		t.Fatalf("version 3: %v, want ErrNotFound", err)
	}
	ref, err := s.SegmentCurrent(c, "android")
	if err != nil || ref.Version != 2 || string(ref.Filter) != string(f2) {
		t.Fatalf("current: %+v, %v", ref, err)
	}

	if _, err := s.CreateSegment(c, "bees", repository.SegmentEdit{Filter: f1}); err != nil {
		t.Fatal(err)
	}
	list, err := s.Segments(c)
	if err != nil || len(list) != 2 || list[0].Name != "android" || list[0].Version != 2 || list[0].Description != desc || list[1].Name != "bees" {
		t.Fatalf("list %+v, %v", list, err)
	}

	// Deleted: gone from the reads, the name free again, the versions kept.
	if err := s.DeleteSegment(c, "android", later); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSegment(c, "android", later); !errors.Is(err, repository.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := s.Segment(c, "android"); !errors.Is(err, repository.ErrNotFound) {
		t.Fatalf("read after delete: %v, want ErrNotFound", err)
	}
	if list, _ := s.Segments(c); len(list) != 1 || list[0].Name != "bees" {
		t.Fatalf("list after delete %+v", list)
	}
	again, err := s.CreateSegment(c, "android", repository.SegmentEdit{Filter: f1})
	if err != nil || again.Version != 1 {
		t.Fatalf("the name again: %+v, %v", again, err)
	}
	var kept int
	if err := s.DB().QueryRowContext(c, "SELECT COUNT(*) FROM segment_versions").Scan(&kept); err != nil || kept != 4 {
		t.Fatalf("%d version rows kept (%v), want 4", kept, err)
	}
}

// seedSegmentTargets seeds n users with ids 1..n, their locale "de" for
// every third, and tokens: one per user, and a second (ios) for every
// fifth user; platforms alternate android and ios. A few users have push
// off and a few tokens are invalidated, which no count includes.
func seedSegmentTargets(t testing.TB, s *repository.Store, n int) {
	t.Helper()
	seedSegmentTargetsAt(t, s, n, 1)
}

// seedSegmentTargetsAt is seedSegmentTargets with the user u's id u × k
// (k > 1: sparse ids, as an app's own may be).
func seedSegmentTargetsAt(t testing.TB, s *repository.Store, n, k int) {
	t.Helper()
	exec(t, s, `INSERT INTO users (id, push_enabled, locale)
		SELECT seq * ?, seq % 97 <> 0, IF(seq % 3 = 0, 'de', 'en') FROM seq_1_to_`+itoa(n), k)
	exec(t, s, `INSERT INTO device_tokens (user_id, token, platform, invalidated_at)
		SELECT seq * ?, CONCAT('tok-', seq), IF(seq % 2 = 0, 'android', 'ios'), IF(seq % 101 = 0, UTC_TIMESTAMP(6), NULL) FROM seq_1_to_`+itoa(n), k)
	exec(t, s, `INSERT INTO device_tokens (user_id, token, platform)
		SELECT seq * 5 * ?, CONCAT('tok2-', seq), 'ios' FROM seq_1_to_`+itoa(n/5), k)
}

func itoa(n int) string { return strconv.Itoa(n) }

// segmentTruth counts what seedSegmentTargets' users match "ios, not de".
func segmentTruth(n int) (tokens, users int64) {
	seen := map[int]bool{}
	for u := 1; u <= n; u++ {
		if u%97 == 0 || u%3 == 0 {
			continue
		}
		if u%2 != 0 && u%101 != 0 {
			tokens++
			seen[u] = true
		}
		if u%5 == 0 {
			tokens++
			seen[u] = true
		}
	}
	return tokens, int64(len(seen))
}

var iosNotDE = model.SegmentRef{Name: "ios", Version: 1, Filter: json.RawMessage(
	`{"and":[{"field":"platform","op":"eq","value":"ios"},{"not":{"field":"locale","op":"eq","value":"de"}}]}`)}

func TestCountSegmentIsExact(t *testing.T) {
	s := newStore(t)
	const n = 3000
	seedSegmentTargets(t, s, n)
	tokens, users, sample, err := s.CountSegment(ctx(t), iosNotDE, 10)
	if err != nil {
		t.Fatal(err)
	}
	wantT, wantU := segmentTruth(n)
	if tokens != wantT || users != wantU {
		t.Fatalf("count %d tokens, %d users; want %d, %d", tokens, users, wantT, wantU)
	}
	if len(sample) != 10 {
		t.Fatalf("sample %v, want 10 ids", sample)
	}
	for _, u := range sample {
		if u%97 == 0 || u%3 == 0 || (u%2 == 0 && u%5 != 0) {
			t.Fatalf("sampled user %d is not in the segment", u)
		}
	}
	// The estimate of a table smaller than its sample reads it all.
	et, eu, _, err := s.EstimateSegment(ctx(t), iosNotDE, 5)
	if err != nil || et != wantT || eu != wantU {
		t.Fatalf("estimate of a small table %d, %d (%v); want exact %d, %d", et, eu, err, wantT, wantU)
	}
	// A filter naming a field the schema lacks is an error, never a count.
	bad := model.SegmentRef{Name: "x", Filter: json.RawMessage(`{"field":"attributes.plan","op":"eq","value":"pro"}`)}
	if _, _, _, err := s.CountSegment(ctx(t), bad, 1); err == nil {
		t.Fatal("count of an unknown field: no error")
	}
}

// TestEstimateSegmentIsClose seeds 200k users (240k tokens) and checks the
// estimate, which reads 100k user ids spread over them, within 1 % of the
// users table (its 95 % bound is 0.3 %; the rest is margin for a sample
// of 20 runs of consecutive ids).
func TestEstimateSegmentIsClose(t *testing.T) {
	s := newStore(t)
	const n = 200_000
	seedSegmentTargets(t, s, n)
	began := time.Now()
	tokens, users, sample, err := s.EstimateSegment(ctx(t), iosNotDE, 10)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	wantT, wantU := segmentTruth(n)
	t.Logf("estimate %d tokens, %d users in %v; exact %d, %d", tokens, users, took, wantT, wantU)
	tol := int64(n / 100)
	if d := tokens - wantT; d > tol || d < -tol {
		t.Fatalf("estimated %d tokens, exact %d: off by %d, more than %d", tokens, wantT, d, tol)
	}
	if d := users - wantU; d > tol || d < -tol {
		t.Fatalf("estimated %d users, exact %d: off by %d, more than %d", users, wantU, d, tol)
	}
	if len(sample) != 10 {
		t.Fatalf("sample %v", sample)
	}
	began = time.Now()
	et, eu, _, err := s.CountSegment(ctx(t), iosNotDE, 10)
	if err != nil || et != wantT || eu != wantU {
		t.Fatalf("exact %d, %d (%v); want %d, %d", et, eu, err, wantT, wantU)
	}
	t.Logf("exact count of %d tokens in %v", n+n/5, time.Since(began))
}

// Updates at once make one version each, one after the other: the
// segment's row is locked for each transaction.
func TestSegmentUpdatesAtOnceMakeEveryVersion(t *testing.T) {
	s := newStore(t)
	c := ctx(t)
	f := json.RawMessage(`{"field":"platform","op":"eq","value":"ios"}`)
	if _, err := s.CreateSegment(c, "busy", repository.SegmentEdit{Filter: f}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			d := "edit " + strconv.Itoa(i)
			_, err := s.UpdateSegment(c, "busy", repository.SegmentEdit{Description: &d, Filter: f})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Segment(c, "busy")
	if err != nil || got.Version != n+1 || len(got.Versions) != n+1 || got.Versions[n].Version != n+1 {
		t.Fatalf("after %d updates: version %d, %d versions (%v)", n, got.Version, len(got.Versions), err)
	}
}

// Users whose ids are sparse (here one id in 1,000) are sampled through
// the tokens' ids: the tokens within the same tolerance, the users
// between the truth and the tokens (a user with two tokens in two ranges
// counts twice).
func TestEstimateSegmentOfSparseUserIDs(t *testing.T) {
	s := newStore(t)
	const n = 200_000
	seedSegmentTargetsAt(t, s, n, 1000)
	tokens, users, sample, err := s.EstimateSegment(ctx(t), iosNotDE, 10)
	if err != nil {
		t.Fatal(err)
	}
	wantT, wantU := segmentTruth(n)
	t.Logf("estimate %d tokens, %d users; exact %d, %d", tokens, users, wantT, wantU)
	tol := int64(n / 100)
	if d := tokens - wantT; d > tol || d < -tol {
		t.Fatalf("estimated %d tokens, exact %d: off by %d, more than %d", tokens, wantT, d, tol)
	}
	if users < wantU-tol || users > tokens {
		t.Fatalf("estimated %d users; want from %d to the tokens, %d", users, wantU-tol, tokens)
	}
	if len(sample) != 10 || sample[0]%1000 != 0 {
		t.Fatalf("sample %v", sample)
	}
}
