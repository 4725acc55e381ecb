package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// GET /push/broadcasts/{id} serves a row at most PUSHFAN_BROADCAST_CACHE
// old, and an instance that cancels a broadcast shows the cancel at once.
func TestBroadcastReadsAreCachedBriefly(t *testing.T) {
	// Long enough that a loaded machine makes the three requests below
	// within it.
	const ttl = 2 * time.Second
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) { c.HTTP.BroadcastCache = ttl }})
	s.SeedTokens(1, tokens("ok-", 20))

	var done teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &done)
	if done.Status != "completed" || done.Succeeded != 20 {
		t.Fatalf("broadcast %+v", done)
	}
	path := fmt.Sprintf("/push/broadcasts/%d", done.ID)
	var got struct {
		teststack.Broadcast
		Engagement struct{ Opened int64 }
	}
	filled := time.Now()
	s.Do("GET", path, nil, &got) // fills the cache
	// Another instance's checkpoint, and opens stored by another instance,
	// as far as this one can tell.
	s.MustExec("UPDATE broadcasts SET succeeded = succeeded + 1000 WHERE id = ?", done.ID)
	s.MustExec("INSERT INTO engagement_counts (broadcast_id, variant, localized, type, n) VALUES (?, 0, 0, 2, 5)", done.ID)
	s.Do("GET", path, nil, &got)
	if took := time.Since(filled); took >= ttl {
		t.Fatalf("three requests took %v, past the cache time %v: the cache cannot be seen", took, ttl)
	}
	if got.Succeeded != 20 || got.Engagement.Opened != 0 {
		t.Fatalf("succeeded %d, opened %d within the cache time, want the cached 20 and 0", got.Succeeded, got.Engagement.Opened)
	}
	waitUntil(t, "the changed row and engagement served once the cache time passed", ttl+10*time.Second, func() bool {
		s.Do("GET", path, nil, &got)
		return got.Succeeded == 1020 && got.Engagement.Opened == 5
	})

	// A cancel on this instance is visible to the next read.
	var later teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "later", "send_at": time.Now().Add(time.Hour).Format(time.RFC3339), "audience": map[string]any{"all": true}}, &later)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("schedule: %d %+v", resp.StatusCode, later)
	}
	lpath := fmt.Sprintf("/push/broadcasts/%d", later.ID)
	got.Status = ""
	s.Do("GET", lpath, nil, &got)
	if got.Status != "scheduled" {
		t.Fatalf("status %s", got.Status)
	}
	if resp := s.Do("POST", lpath+"/cancel", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	s.Do("GET", lpath, nil, &got)
	if got.Status != "canceled" {
		t.Fatalf("status %s right after the cancel, want canceled", got.Status)
	}
}
