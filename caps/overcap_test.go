package caps_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// sendGate holds the first send to a token starting with prefix at the
// emulator until release: a send in flight for as long as the test needs.
// A gate made disarmed lets every send through until it is armed.
type sendGate struct {
	prefix  string
	off     atomic.Bool   // disarmed
	arrived chan struct{} // closed when the held send reached the emulator
	release func()        // lets it through (safe twice)
	mu      sync.Mutex
	held    bool
	open    chan struct{}
}

func newSendGate(prefix string) *sendGate {
	g := &sendGate{prefix: prefix, arrived: make(chan struct{}), open: make(chan struct{})}
	var once sync.Once
	g.release = func() { once.Do(func() { close(g.open) }) }
	return g
}

// newDisarmedSendGate is a gate that holds nothing until arm.
func newDisarmedSendGate(prefix string) *sendGate {
	g := newSendGate(prefix)
	g.off.Store(true)
	return g
}

func (g *sendGate) arm() { g.off.Store(false) }

func (g *sendGate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !g.off.Load() && bytes.Contains(body, []byte(`"`+g.prefix)) {
			g.mu.Lock()
			first := !g.held
			g.held = true
			g.mu.Unlock()
			if first {
				close(g.arrived)
				select {
				case <-g.open:
				case <-r.Context().Done():
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// metric reads one sample of the first instance's /metrics.
func metric(t *testing.T, s *teststack.Stack, name string) (float64, bool) {
	t.Helper()
	req, err := http.NewRequest("GET", s.API.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+teststack.AdminToken)
	resp, err := s.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// The over-cap race, reproduced step by step: user 1 has two devices,
// each in its own chunk of broadcast A under 1/day. The first is dead
// (the emulator answers UNREGISTERED); the send to the second is held
// in flight at the emulator. A's checkpoint stores the dead device, and
// then broadcast B, to user 1, races for the day's slot while A's send
// is still in flight. B must find the slot taken (A's other chunk holds
// the user's answer): user 1 gets exactly one message, A's, counted at
// the emulator. Before the holds, the checkpoint gave the slot back, B
// took it and sent, and A's held send made two.
func TestAUserReleasedInOneChunkIsNotSentPastTheCapFromAnother(t *testing.T) {
	gate := newSendGate("held-")
	s := teststack.New(t, teststack.Options{
		Configure: func(c *config.Config) {
			c.Engine.FrequencyCap = "1/day"
			c.Engine.ChunkWidth = 1                // each device its own chunk
			c.Engine.SendTimeout = 2 * time.Minute // the held send is not retried meanwhile
		},
		EmulatorWrap: gate.wrap,
	})
	t.Cleanup(gate.release) // before the stack stops (cleanups run last first)
	s.Emu.RecordMessages()
	s.MustExec("INSERT INTO users (id) VALUES (1)")
	s.MustExec("INSERT INTO device_tokens (id, user_id, token) VALUES (1, 1, 'unregistered-1'), (2, 1, 'held-1')")

	a := submit(s, map[string]any{"title": "A", "body": "first", "audience": map[string]any{"all": true}})
	select {
	case <-gate.arrived:
	case <-time.After(time.Minute):
		t.Fatal("waited a minute for broadcast A's send to held-1 to reach the emulator")
	}
	teststack.WaitEvery(t, "broadcast A's checkpoint storing the failure of unregistered-1", time.Minute, 20*time.Millisecond, func() bool {
		var b teststack.Broadcast
		s.Do("GET", "/push/broadcasts/"+strconv.FormatUint(a.ID, 10), nil, &b)
		return b.Failed == 1
	})
	// A's send to held-1 is in flight; B races for user 1's day.
	b := submit(s, map[string]any{"title": "B", "body": "racing", "audience": map[string]any{"user_ids": []uint64{1}}, "class": "bulk"})
	fb := s.WaitFinished(b.ID, time.Minute)
	gate.release()
	fa := s.WaitFinished(a.ID, time.Minute)
	checkSums(t, fa)
	checkSums(t, fb)
	if fa.Succeeded != 1 || fa.Failed != 1 || fa.Capped != 0 {
		t.Errorf("A: succeeded %d, failed %d, capped %d; want held-1 sent, unregistered-1 failed", fa.Succeeded, fa.Failed, fa.Capped)
	}
	if fb.Targeted != 1 || fb.Capped != 1 || fb.Succeeded != 0 {
		t.Errorf("B: targeted %d, succeeded %d, capped %d; want its one target (held-1; unregistered-1 is invalidated) capped", fb.Targeted, fb.Succeeded, fb.Capped)
	}
	held, dead := s.Emu.Counts("held-1"), s.Emu.Counts("unregistered-1")
	if held.Accepted != 1 || dead.Accepted != 0 {
		t.Fatalf("the emulator accepted %d messages for held-1 and %d for unregistered-1; want exactly 1 for user 1 under 1/day", held.Accepted, dead.Accepted)
	}
	if rec, ok, err := s.Emu.LastNotification("held-1"); err != nil || !ok || rec.Title != "A" {
		t.Errorf("held-1 got %+v (recorded %v, %v); want A's message", rec, ok, err)
	}
	var slots int
	if err := s.SQL.QueryRow("SELECT COUNT(*) FROM frequency_slots WHERE user_id = 1 AND broadcast_id = ? AND expires_at > UTC_TIMESTAMP(6)", a.ID).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if slots != 1 {
		t.Errorf("user 1 holds %d live slots of A, want 1", slots)
	}
	if v, ok := metric(t, s, `pushfan_frequency_cap_exceeded_total{app="default"}`); !ok || v != 0 {
		t.Errorf("pushfan_frequency_cap_exceeded_total %v (exposed: %v), want 0", v, ok)
	}
}
