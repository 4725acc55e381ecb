package server_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

const segmentViewerToken = "segment-viewer-token-0123456789"

type segmentObject struct {
	Name        string          `json:"name"`
	Version     int             `json:"version"`
	Description string          `json:"description"`
	Filter      json.RawMessage `json:"filter"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	CreatedBy   string          `json:"created_by"`
	Versions    []struct {
		Version     int       `json:"version"`
		Description string    `json:"description"`
		CreatedAt   time.Time `json:"created_at"`
		CreatedBy   string    `json:"created_by"`
	} `json:"versions"`
}

type segmentPreview struct {
	Tokens int64    `json:"tokens"`
	Users  int64    `json:"users"`
	Sample []uint64 `json:"sample"`
	Exact  bool     `json:"exact"`
}

// seedSegmentStack seeds n users and their tokens: user u has push off
// when u%50 = 0, locale de when u%3 = 0; one token each, ios for even u,
// invalidated when u%41 = 0, on app version 5.9.2, 5.10.0, 5.10.1 or none
// by u%4; and every seventh user a second token, ios on 6.0.
func seedSegmentStack(s *teststack.Stack, n int) {
	s.MustExec(`INSERT INTO users (id, push_enabled, locale) SELECT seq, seq % 50 <> 0, IF(seq % 3 = 0, 'de', 'en') FROM seq_1_to_` + strconv.Itoa(n))
	s.MustExec(`INSERT INTO device_tokens (user_id, token, platform, app_version, invalidated_at)
		SELECT seq, CONCAT('seg-', seq), IF(seq % 2 = 0, 'ios', 'android'), ELT(seq % 4 + 1, '5.9.2', '5.10.0', '5.10.1', NULL),
			IF(seq % 41 = 0, UTC_TIMESTAMP(6), NULL) FROM seq_1_to_` + strconv.Itoa(n))
	s.MustExec(`INSERT INTO device_tokens (user_id, token, platform, app_version)
		SELECT seq * 7, CONCAT('seg2-', seq), 'ios', '6.0' FROM seq_1_to_` + strconv.Itoa(n/7))
}

// iosNewTruth is what seedSegmentStack's targets match "platform ios and
// app_version at least 5.10.0", counted in Go.
func iosNewTruth(n int) (tokens, users int64) {
	for u := 1; u <= n; u++ {
		if u%50 == 0 {
			continue
		}
		mine := 0
		if u%41 != 0 && u%2 == 0 && (u%4 == 1 || u%4 == 2) {
			mine++
		}
		if u%7 == 0 {
			mine++
		}
		tokens += int64(mine)
		if mine > 0 {
			users++
		}
	}
	return tokens, users
}

const iosNewFilter = `{"and":[{"field":"platform","op":"eq","value":"ios"},{"field":"app_version","op":"gte","value":"5.10.0"}]}`

// Through HTTP, the real stack and its database (every exchange checked
// against the OpenAPI document): a segment is created, updated to version
// 2, read with its versions and at version 1, previewed with the counts
// of what was seeded, deleted, and its name used again.
func TestSegmentsEndToEnd(t *testing.T) {
	coveredBy(t, "packages repository and segment, and the contract tests (segments_contract_test.go)")
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.AdminTokens = append(c.AdminTokens, "dash:viewer:"+segmentViewerToken)
	}})
	const n = 3000
	seedSegmentStack(s, n)

	v1 := `{"and":[{"field":"platform","op":"eq","value":"ios"},{"field":"locale","op":"eq","value":"de"}]}`
	var seg segmentObject
	if r := s.Do(http.MethodPost, "/push/segments", `{"name": "ios-new", "description": "iOS in German", "filter": `+v1+`}`, &seg); r.StatusCode != http.StatusCreated ||
		seg.Version != 1 || seg.Description != "iOS in German" || string(seg.Filter) != v1 || seg.CreatedBy == "" {
		t.Fatalf("create: %d %+v", r.StatusCode, seg)
	}
	var refused teststack.ErrorBody
	if r := s.Do(http.MethodPost, "/push/segments", `{"name": "ios-new", "filter": `+v1+`}`, &refused); r.StatusCode != http.StatusConflict || refused.Error.Code != "segment_exists" {
		t.Fatalf("the name again: %d %+v", r.StatusCode, refused)
	}
	bad := `{"filter": {"and": [{"field":"platform","op":"eq","value":"ios"},{"field":"app_version","op":"within","value":"3d"}]}}`
	if r := s.Do(http.MethodPut, "/push/segments/ios-new", bad, &refused); r.StatusCode != http.StatusBadRequest || refused.Error.Field != "filter.and[1].op" {
		t.Fatalf("a bad op: %d %+v", r.StatusCode, refused)
	}
	var v2 segmentObject
	if r := s.Do(http.MethodPut, "/push/segments/ios-new", `{"description": "iOS on 5.10 or later", "filter": `+iosNewFilter+`}`, &v2); r.StatusCode != http.StatusOK ||
		v2.Version != 2 || v2.Description != "iOS on 5.10 or later" || !v2.CreatedAt.Equal(seg.CreatedAt) || v2.UpdatedAt.Before(seg.UpdatedAt) {
		t.Fatalf("update: %d %+v", r.StatusCode, v2)
	}
	var got segmentObject
	if r := s.DoAuth(http.MethodGet, "/push/segments/ios-new", segmentViewerToken, nil, &got); r.StatusCode != http.StatusOK ||
		got.Version != 2 || string(got.Filter) != iosNewFilter || len(got.Versions) != 2 || got.Versions[0].Description != "iOS in German" || got.Versions[1].Version != 2 {
		t.Fatalf("get: %d %+v", r.StatusCode, got)
	}
	var first struct {
		Version int             `json:"version"`
		Filter  json.RawMessage `json:"filter"`
	}
	if r := s.DoAuth(http.MethodGet, "/push/segments/ios-new/versions/1", segmentViewerToken, nil, &first); r.StatusCode != http.StatusOK || first.Version != 1 || string(first.Filter) != v1 {
		t.Fatalf("version 1: %d %+v", r.StatusCode, first)
	}
	var list struct {
		Segments []segmentObject `json:"segments"`
	}
	if r := s.DoAuth(http.MethodGet, "/push/segments", segmentViewerToken, nil, &list); r.StatusCode != http.StatusOK || len(list.Segments) != 1 || list.Segments[0].Version != 2 {
		t.Fatalf("list: %d %+v", r.StatusCode, list)
	}

	wantT, wantU := iosNewTruth(n)
	for _, exact := range []bool{false, true} {
		var p segmentPreview
		body := `{"filter": ` + iosNewFilter + `, "exact": ` + strconv.FormatBool(exact) + `}`
		if r := s.Do(http.MethodPost, "/push/segments/preview", body, &p); r.StatusCode != http.StatusOK ||
			!p.Exact || p.Tokens != wantT || p.Users != wantU || len(p.Sample) != 10 {
			t.Fatalf("preview (exact %v): %d %+v; want exactly %d tokens, %d users", exact, r.StatusCode, p, wantT, wantU)
		}
		for _, u := range p.Sample {
			if u%50 == 0 || (u%7 != 0 && (u%2 != 0 || u%4 == 0 || u%4 == 3 || u%41 == 0)) {
				t.Fatalf("sampled user %d is not in the segment", u)
			}
		}
	}

	if r := s.DoAuth(http.MethodDelete, "/push/segments/ios-new", segmentViewerToken, nil, &refused); r.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer delete: %d", r.StatusCode)
	}
	if r := s.Do(http.MethodDelete, "/push/segments/ios-new", nil, nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", r.StatusCode)
	}
	if r := s.Do(http.MethodGet, "/push/segments/ios-new", nil, &refused); r.StatusCode != http.StatusNotFound || refused.Error.Code != "segment_not_found" {
		t.Fatalf("get after delete: %d %+v", r.StatusCode, refused)
	}
	var again segmentObject
	if r := s.Do(http.MethodPost, "/push/segments", `{"name": "ios-new", "filter": `+iosNewFilter+`}`, &again); r.StatusCode != http.StatusCreated || again.Version != 1 {
		t.Fatalf("the name reused: %d %+v", r.StatusCode, again)
	}
}
