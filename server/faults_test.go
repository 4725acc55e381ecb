package server_test

import (
	"testing"
	"time"

	"pushfan/config"
	"pushfan/fcmemu"
	"pushfan/internal/testsupport/teststack"
)

// A proxy between the only instance and MariaDB faults every 5th COMMIT:
// half of them are forwarded and the connection cut before the OK reaches
// pushfan (the transaction happened, pushfan sees an error), half are cut
// instead of forwarded (the server rolls back). Claims, checkpoints,
// releases, finishing and the submit itself all go through it. The
// broadcast completes, and its counts and /push/stats equal the audience
// exactly: nothing counted twice, no target missing at the emulator.
func TestCommitsWithLostAnswersOrNeverArrivingCountExactly(t *testing.T) {
	s := teststack.New(t, teststack.Options{
		DBProxy:  true,
		Emulator: fcmemu.Config{Latency: 5 * time.Millisecond},
		Configure: func(c *config.Config) {
			c.Engine.ChunkWidth = 2000
			c.Engine.FlushInterval = 50 * time.Millisecond // the default
			c.Engine.RateLimit = 10000
		},
	})
	const n = 30000
	toks := tokens("ok-", n)
	s.SeedTokens(1, toks)
	s.Proxy.FaultCommits(5)
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	if resp.StatusCode != 202 && resp.StatusCode != 200 {
		t.Fatalf("submit through the faulty proxy: %d", resp.StatusCode)
	}
	final := s.WaitFinished(b.ID, 3*time.Minute)
	s.Proxy.FaultCommits(0)
	lost, dropped := s.Proxy.AppliedLost.Load(), s.Proxy.NotForwarded.Load()
	if final.Status != "completed" || final.Targeted != n || final.Succeeded != n || final.Failed != 0 || final.Canceled != 0 {
		t.Fatalf("final %+v with %d lost answers and %d dropped commits", final, lost, dropped)
	}
	var st struct {
		Broadcasts, Targeted, Succeeded, Failed int64
	}
	s.Do("GET", "/push/stats", nil, &st)
	if st.Broadcasts != 1 || st.Targeted != n || st.Succeeded != n || st.Failed != 0 {
		t.Fatalf("stats %+v, want one broadcast of %d", st, n)
	}
	var dups int64
	for _, tk := range toks {
		c := s.Emu.Counts(tk)
		if c.Accepted == 0 {
			t.Fatalf("%s never reached the emulator", tk)
		}
		dups += c.Accepted - 1
	}
	if lost < 5 || dropped < 5 {
		t.Fatalf("only %d lost answers and %d dropped commits: the drill did not exercise the protocol", lost, dropped)
	}
	t.Logf("%d tokens through %d commits whose answer was lost and %d that never arrived: completed exactly, %d duplicate sends, %d chunks, %d claims",
		n, lost, dropped, dups, final.Chunks.Chunks, final.Chunks.Claims)
}
