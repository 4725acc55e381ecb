package server_test

import (
	"sync"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/fcmemu"
	"pushfan/internal/testsupport/teststack"
)

// The production wire, end to end: the direct client over pushfan's own
// HTTP/2 client to an emulator serving TLS + HTTP/2. Retries, budgets and
// send timeouts come out as over HTTP/1.1.
func TestTLSWireRetriesAndTimeouts(t *testing.T) {
	coveredBy(t, "fcm (TestSDKRetriesStopAtTheBudget) and fanout (TestSendTimeoutApplies)")
	const timeout = time.Second // the first sends also wait for the TLS handshakes (slow under -race)
	s := teststack.New(t, teststack.Options{EmulatorTLS: true, Configure: func(c *config.Config) {
		c.Engine.MaxAttempts = 4
		c.Engine.SendTimeout = timeout
	}})
	s.SeedTokens(1, append([]string{"flaky1xunavailable-a", "flaky3xinternal-b", "flaky2xquota-c", "internal-always", "hang-1"}, tokens("ok-", 300)...))
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	want := map[string]fcmemu.TokenCounts{
		"flaky1xunavailable-a": {Attempts: 2, Accepted: 1},
		"flaky3xinternal-b":    {Attempts: 4, Accepted: 1},
		"flaky2xquota-c":       {Attempts: 3, Accepted: 1},
		"internal-always":      {Attempts: 4},
		"hang-1":               {Attempts: 4},
		"ok-7":                 {Attempts: 1, Accepted: 1},
	}
	for tk, w := range want {
		if got := s.Emu.Counts(tk); got.Attempts != w.Attempts || got.Accepted != w.Accepted {
			t.Errorf("%s: %+v, want %+v", tk, got, w)
		}
	}
	if b.Status != "completed" || b.Succeeded != 303 || b.Failed != 2 || b.Errors["INTERNAL"] != 1 || b.Errors["TIMEOUT"] != 1 {
		t.Fatalf("broadcast %+v", b)
	}
}

// Connections cut with sends in flight (every connection to the
// emulator, twice): the sends on them are network errors the engine sends
// again, and the broadcast still counts every token once and loses none.
func TestTLSWireConnectionsCutMidBroadcast(t *testing.T) {
	const n = 4000
	s := teststack.New(t, teststack.Options{EmulatorTLS: true, Emulator: fcmemu.Config{Latency: 20 * time.Millisecond},
		Configure: func(c *config.Config) { c.Engine.MaxAttempts = 5 }})
	s.SeedTokens(1, tokens("ok-cut-", n))
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, at := range []int64{n / 4, n / 2} {
			deadline := time.Now().Add(30 * time.Second)
			for s.Emu.Stats().Accepted < at && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			s.EmuServer.CloseClientConnections()
		}
	})
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	wg.Wait()
	if b.Status != "completed" || b.Succeeded != n || b.Failed != 0 {
		t.Fatalf("broadcast %+v", b)
	}
	for _, tk := range tokens("ok-cut-", n) {
		if c := s.Emu.Counts(tk); c.Accepted < 1 {
			t.Fatalf("%s was never accepted: %+v", tk, c)
		}
	}
	st := s.Emu.Stats()
	if st.ConnectionsAccepted < 2 {
		t.Logf("connections accepted: %d", st.ConnectionsAccepted)
	}
	t.Logf("%d requests for %d tokens, %d accepted", st.Requests, n, st.Accepted)
}
