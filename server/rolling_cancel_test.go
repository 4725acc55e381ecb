package server_test

import (
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/config"
	"pushfan/fcmemu"
	"pushfan/internal/testsupport/teststack"
)

// Rolling deploy: the cancel lands on an instance whose configuration lacks
// the named audience. It cannot count the closed chunks' remaining targets,
// so it leaves them to the instance that can, and every target is counted.
func TestCancelOnAnInstanceLackingTheAudienceCountsEveryTarget(t *testing.T) {
	defs := []audience.Definition{{Name: "new_segment",
		SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after AND t.id <= :upto ORDER BY t.id LIMIT :limit"}}
	s := teststack.New(t, teststack.Options{
		Emulator: fcmemu.Config{Latency: 100 * time.Millisecond},
		Configure: func(c *config.Config) {
			c.Engine.ChunkWidth = 300
			c.Engine.Concurrency = 2
			c.Engine.ChunkParallel = 1
		}})
	s.SeedTokens(1, tokens("ok-", 3000))
	newer := s.AddInstanceWith(func(c *config.Config) { c.Audiences = defs })
	var b teststack.Broadcast
	s.DoURL(newer.API.URL, "POST", "/push/broadcast?wait=0", map[string]any{"title": "x", "audience": map[string]any{"name": "new_segment"}}, &b)
	waitUntil(t, "the first sends", 10*time.Second, func() bool { return s.Emu.Stats().Accepted > 0 })
	var c teststack.Broadcast
	s.Do("POST", "/push/broadcasts/"+itoa(b.ID)+"/cancel", nil, &c) // the older instance
	final := s.WaitFinished(b.ID, time.Minute)
	t.Logf("final: status=%s targeted=%d succeeded=%d failed=%d canceled=%d", final.Status, final.Targeted, final.Succeeded, final.Failed, final.Canceled)
	if got := final.Succeeded + final.Failed + final.Canceled; got != 3000 || final.Targeted != 3000 || final.Status != "canceled" || final.Canceled == 0 {
		t.Fatalf("3000 targets, %d counted: %+v", got, final)
	}
	if final.Succeeded != s.Emu.Stats().Accepted {
		t.Fatalf("succeeded %d, the emulator accepted %d", final.Succeeded, s.Emu.Stats().Accepted)
	}
}
