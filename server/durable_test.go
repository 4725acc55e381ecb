package server_test

import (
	"fmt"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/fcmemu"
	"pushfan/internal/testsupport/teststack"
)

func TestLargeBroadcastAnswers202AndShowsProgress(t *testing.T) {
	s := teststack.New(t, teststack.Options{
		Emulator: fcmemu.Config{Latency: 20 * time.Millisecond},
		Configure: func(c *config.Config) {
			c.Engine.Concurrency = 16
			c.HTTP.WaitTimeout = 300 * time.Millisecond
		},
	})
	s.SeedTokens(1, tokens("ok-", 3000))
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusAccepted || loc != fmt.Sprintf("/push/broadcasts/%d", b.ID) || b.Status == "completed" {
		t.Fatalf("submit: %d %q %+v", resp.StatusCode, loc, b)
	}
	var last int64 = -1
	var distinct int
	var sawTargeted bool
	// Sampled every 30 ms: 3000 sends at 16 × 20 ms take about 4 s.
	teststack.WaitEvery(t, "the broadcast to complete while watching its progress", time.Minute, 30*time.Millisecond, func() bool {
		var cur teststack.Broadcast
		s.Do("GET", loc, nil, &cur)
		if cur.Succeeded < last {
			t.Fatalf("progress went backwards: %d -> %d", last, cur.Succeeded)
		}
		if cur.Succeeded != last {
			distinct++
			last = cur.Succeeded
		}
		if cur.Status == "running" && cur.Targeted == 3000 {
			sawTargeted = true
		}
		if cur.Final() {
			if cur.Status != "completed" || cur.Succeeded != 3000 || cur.Targeted != 3000 {
				t.Fatalf("final %+v", cur)
			}
			return true
		}
		return false
	})
	if distinct < 3 || !sawTargeted {
		t.Fatalf("progress seen at %d values, targeted known while running: %v", distinct, sawTargeted)
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	s.SeedTokens(1, tokens("ok-", 300))
	body := map[string]any{"title": "once", "audience": map[string]any{"all": true}}
	post := func(key string, body any) (*http.Response, teststack.Broadcast, teststack.ErrorBody) {
		req, _ := http.NewRequest("POST", s.API.URL+"/push/broadcast", jsonBody(t, body))
		req.Header.Set("Authorization", "Bearer "+teststack.AdminToken)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b teststack.Broadcast
		var e teststack.ErrorBody
		raw := readAll(t, resp)
		if resp.StatusCode < 300 {
			decode(t, raw, &b)
		} else {
			decode(t, raw, &e)
		}
		return resp, b, e
	}
	r1, b1, _ := post("key-1", body)
	r2, b2, _ := post("key-1", body)
	if r1.StatusCode != 200 || r2.StatusCode != 200 || b1.ID != b2.ID || r2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d/%d ids %d/%d", r1.StatusCode, r2.StatusCode, b1.ID, b2.ID)
	}
	if !reflect.DeepEqual(b1, b2) {
		t.Fatalf("replayed answer differs:\n%+v\n%+v", b1, b2)
	}
	if st := s.Emu.Stats(); st.Accepted != 300 {
		t.Fatalf("emulator accepted %d, want 300: the repeat sent again", st.Accepted)
	}
	r3, _, e := post("key-1", map[string]any{"title": "different", "audience": map[string]any{"all": true}})
	if r3.StatusCode != http.StatusConflict || e.Error.Code != "idempotency_key_conflict" {
		t.Fatalf("same key, other body: %d %+v", r3.StatusCode, e)
	}
	// Concurrent double-click: one broadcast.
	var ids [2]atomic.Uint64
	done := make(chan struct{}, 2)
	for i := range 2 {
		go func() {
			_, b, _ := post("key-2", body)
			ids[i].Store(b.ID)
			done <- struct{}{}
		}()
	}
	for range 2 {
		teststack.Receive(t, "a concurrent repeat of the keyed POST to answer", time.Minute, done)
	}
	if ids[0].Load() == 0 || ids[0].Load() != ids[1].Load() {
		t.Fatalf("concurrent repeats made broadcasts %d and %d", ids[0].Load(), ids[1].Load())
	}
	if st := s.Emu.Stats(); st.Accepted != 600 {
		t.Fatalf("emulator accepted %d, want 600", st.Accepted)
	}
}

func TestTwoInstancesShareOneBroadcast(t *testing.T) {
	coveredBy(t, "lease (TestConcurrentClaimsNeverShareAChunk) and the two-process drills")
	s := teststack.New(t, teststack.Options{
		Emulator:  fcmemu.Config{Latency: 5 * time.Millisecond},
		Configure: func(c *config.Config) { c.Engine.Concurrency = 32 },
	})
	second := s.AddInstance()
	const n = 20000
	toks := tokens("ok-", n)
	s.SeedTokens(1, toks)
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	// Any instance answers about any broadcast.
	var viaSecond teststack.Broadcast
	resp := s.DoURL(second.API.URL, "GET", fmt.Sprintf("/push/broadcasts/%d", b.ID), nil, &viaSecond)
	if resp.StatusCode != 200 || viaSecond.ID != b.ID {
		t.Fatalf("second instance: %d %+v", resp.StatusCode, viaSecond)
	}
	final := s.WaitFinished(b.ID, 3*time.Minute)
	if final.Status != "completed" || final.Succeeded != n || final.Targeted != n {
		t.Fatalf("final %+v", final)
	}
	for _, tk := range toks {
		if c := s.Emu.Counts(tk); c.Accepted != 1 {
			t.Fatalf("%s accepted %d times", tk, c.Accepted)
		}
	}
	if final.Chunks == nil {
		t.Fatal("a finished broadcast has no chunk summary")
	}
	owners := final.Chunks.DoneBy
	if len(owners) != 2 || owners[s.Service.Owner()] == 0 || owners[second.Service.Owner()] == 0 {
		t.Fatalf("chunks done by %v: both instances should have sent", owners)
	}
}

func TestStoppedInstanceReleasesChunksAndAnotherFinishes(t *testing.T) {
	coveredBy(t, "lease (TestReleasedTakeoverKeepsDoneRangesItDidNotReach) and the SIGTERM drill")
	s := teststack.New(t, teststack.Options{
		Emulator:  fcmemu.Config{Latency: 10 * time.Millisecond},
		Configure: func(c *config.Config) { c.Engine.Concurrency = 32; c.Engine.Lease = 30 * time.Second },
	})
	const n = 10000
	toks := tokens("ok-", n)
	s.SeedTokens(1, toks)
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	waitUntil(t, "40% of the audience accepted by the emulator", time.Minute, func() bool { return s.Emu.Stats().Accepted >= n*4/10 })
	if err := s.Service.Stop(t.Context()); err != nil { // what SIGTERM does
		t.Fatal(err)
	}
	chunks, err := s.Leases.Chunks(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if c.Status == "leased" {
			t.Fatalf("chunk %d still leased after a graceful stop", c.Seq)
		}
	}
	sentBefore := s.Emu.Stats().Accepted
	start := time.Now()
	second := s.AddInstance()
	final := s.WaitFinished(b.ID, time.Minute)
	if final.Status != "completed" || final.Succeeded != n || final.Targeted != n {
		t.Fatalf("final %+v", final)
	}
	var dups int64
	for _, tk := range toks {
		c := s.Emu.Counts(tk)
		if c.Accepted < 1 {
			t.Fatalf("%s never delivered", tk)
		}
		dups += c.Accepted - 1
	}
	// A graceful stop checkpoints exactly: only sends in flight when it
	// began can be repeated.
	if dups > int64(s.Config.Engine.Concurrency) {
		t.Fatalf("%d duplicates after a graceful stop", dups)
	}
	t.Logf("stopped at %d/%d sent; second instance %s finished in %v with %d duplicates", sentBefore, n, second.Service.Owner(), time.Since(start), dups)
}

func TestDatabaseOutageMidBroadcast(t *testing.T) {
	s := teststack.New(t, teststack.Options{
		DBProxy:   true,
		Emulator:  fcmemu.Config{Latency: 10 * time.Millisecond},
		Configure: func(c *config.Config) { c.Engine.Concurrency = 32; c.DB.Timeout = time.Second },
	})
	const n = 10000
	toks := tokens("ok-", n)
	s.SeedTokens(1, toks)
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	waitUntil(t, "30% of the audience accepted by the emulator", time.Minute, func() bool { return s.Emu.Stats().Accepted >= n*3/10 })
	// The rate before the outage, over a quarter second (the sleep is the
	// measuring window).
	a0, t0 := s.Emu.Stats().Accepted, time.Now()
	time.Sleep(250 * time.Millisecond)
	a1 := s.Emu.Stats().Accepted
	rate := float64(a1-a0) / time.Since(t0).Seconds()
	s.Proxy.Cut()
	// The outage itself, the subject of the test: three DB timeouts long,
	// so checkpoints and claims time out and are retried while it lasts.
	time.Sleep(3 * s.Config.DB.Timeout)
	during := s.Emu.Stats().Accepted - a1
	s.Proxy.Restore()
	// Outcomes nobody can store are what a crash would repeat: the run
	// stops handing out targets a checkpoint interval (and 50 ms) after
	// its last stored one. What the workers held, the pool's queue (a page)
	// and one more interval of sends before the cut may still go.
	cfg := s.Config.Engine
	bound := int64(cfg.Concurrency+cfg.PageSize) + int64(rate*(2*cfg.FlushInterval+100*time.Millisecond).Seconds())
	if during > bound {
		t.Fatalf("%d sends while no checkpoint could be stored (%.0f/s before), want at most %d", during, rate, bound)
	}
	t.Logf("%.0f sends/s before the outage; %d sent during its %v (bound %d)", rate, during, 3*s.Config.DB.Timeout, bound)
	final := s.WaitFinished(b.ID, 2*time.Minute)
	if final.Status != "completed" || final.Succeeded != n || final.Targeted != n || final.Failed != 0 {
		t.Fatalf("final %+v", final)
	}
	for _, tk := range toks {
		if s.Emu.Counts(tk).Accepted < 1 {
			t.Fatalf("%s never delivered", tk)
		}
	}
}

// A database that is slow to commit (reads still answer) must not let a
// chunk run send on and on unrecorded: what a crash would repeat stays
// bounded by the chunk's store gate.
func TestStalledCommitsHoldTheSends(t *testing.T) {
	// The default chunk width: a chunk run has its audience to send on
	// with, and no new claim (which commits) is needed during the stall.
	s := teststack.New(t, teststack.Options{DBProxy: true, Configure: func(c *config.Config) { c.Engine.ChunkWidth = config.Defaults().Engine.ChunkWidth }})
	const n = 40000
	toks := tokens("ok-", n)
	s.SeedTokens(1, toks)
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast?wait=0", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &b)
	waitUntil(t, "20% of the audience accepted by the emulator", time.Minute, func() bool { return s.Emu.Stats().Accepted >= n/5 })
	a0, t0 := s.Emu.Stats().Accepted, time.Now()
	time.Sleep(250 * time.Millisecond) // the measuring window for the rate
	a1 := s.Emu.Stats().Accepted
	rate := float64(a1-a0) / time.Since(t0).Seconds()
	const stall = 2 * time.Second
	s.Proxy.StallCommits(stall)
	time.Sleep(stall - 100*time.Millisecond) // the stall is the subject
	during := s.Emu.Stats().Accepted - a1
	final := s.WaitFinished(b.ID, 2*time.Minute)
	if final.Status != "completed" || final.Succeeded != n || final.Targeted != n {
		t.Fatalf("final %+v", final)
	}
	for _, tk := range toks {
		if s.Emu.Counts(tk).Accepted != 1 {
			t.Fatalf("%s accepted %d times, want exactly 1", tk, s.Emu.Counts(tk).Accepted)
		}
	}
	// Sent while nothing could be stored: the checkpoint interval and 50 ms
	// after the last stored checkpoint (taken up to an interval before the
	// stall), plus what was in flight.
	cfg := s.Config.Engine
	bound := s.Emu.Stats().MaxInFlight + int64(rate*(2*cfg.FlushInterval+50*time.Millisecond).Seconds())
	if during > bound {
		t.Fatalf("%d sends during a %v commit stall (%.0f/s before it), want at most %d", during, stall, rate, bound)
	}
	t.Logf("%.0f sends/s before a %v commit stall; %d sent during it (bound %d; without the gate, the rate times the stall)", rate, stall, during, bound)
}
