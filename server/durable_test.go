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
	"pushfan/internal/teststack"
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
	s := teststack.New(t, teststack.Options{})
	s.SeedTokens(1, tokens("ok-", 300))
	body := map[string]any{"title": "once", "audience": map[string]any{"all": true}}
	post := func(key string, body any) (*http.Response, teststack.Broadcast, teststack.ErrorBody) {
		req, _ := http.NewRequest("POST", s.API.URL+"/push/broadcast", jsonBody(t, body))
		req.Header.Set("Authorization", "Bearer "+teststack.AdminToken)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
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
	final := s.WaitFinished(b.ID, time.Minute)
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
	s.Proxy.Cut()
	// The outage itself, the subject of the test: three DB timeouts long,
	// so checkpoints and claims time out and are retried while it lasts.
	time.Sleep(3 * s.Config.DB.Timeout)
	s.Proxy.Restore()
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
