package fcmemu

import (
	"encoding/json"
	"testing"
	"time"
)

func TestParseFlaky(t *testing.T) {
	for _, tc := range []struct {
		token string
		k     int64
		code  code
		hang  bool
		ok    bool
	}{
		{"flaky2xunavailable-abc", 2, codeUnavailable, false, true},
		{"flaky3xinternal-abc", 3, codeInternal, false, true},
		{"flaky1xquota-abc", 1, codeQuotaExceeded, false, true},
		{"flaky12xauth-a-b", 12, codeThirdPartyAuth, false, true},
		{"flaky1xhang-a", 1, codeOK, true, true},
		{"flaky0xinternal-a", 0, codeInternal, false, true},
		{"flakyxinternal-a", 0, 0, false, false},
		{"flaky2internal-a", 0, 0, false, false},
		{"flaky2xbogus-a", 0, 0, false, false},
		{"flaky2xinternal", 0, 0, false, false},
		{"flaky", 0, 0, false, false},
	} {
		k, o, ok := parseFlaky(tc.token)
		if ok != tc.ok || (ok && (k != tc.k || o.code != tc.code || o.hang != tc.hang)) {
			t.Errorf("parseFlaky(%q) = %d, %+v, %v", tc.token, k, o, ok)
		}
	}
	if o := outcomeForToken("flaky2xinternal-a", 2); o.code != codeInternal {
		t.Errorf("attempt 2 of flaky2x: %+v", o)
	}
	if o := outcomeForToken("flaky2xinternal-a", 3); o.code != codeOK || o.hang {
		t.Errorf("attempt 3 of flaky2x: %+v", o)
	}
}

func TestCeilSeconds(t *testing.T) {
	for ns, want := range map[int64]int{
		-5: 1, 0: 1, 1: 1, int64(time.Second): 1, int64(time.Second) + 1: 2, int64(1500 * time.Millisecond): 2,
	} {
		if got := ceilSeconds(ns); got != want {
			t.Errorf("ceilSeconds(%d) = %d, want %d", ns, got, want)
		}
	}
}

func TestProjectBackoffUnion(t *testing.T) {
	var b projectBackoff
	s := int64(time.Second)
	b.announce(0, 2*s, s/4) // window [0.25s, 2s)
	for at, want := range map[int64]bool{s / 8: false, s / 2: true, 2*s - 1: true, 2 * s: false} {
		if got := b.during(at); got != want {
			t.Errorf("during(%d) = %v, want %v", at, got, want)
		}
	}
	b.announce(s, 3*s, s/4) // overlaps: extends to [0.25s, 3s)
	if !b.during(2*s+s/2) || !b.during(s/2) {
		t.Error("overlapping window not merged")
	}
	b.announce(5*s, 6*s, s/4) // disjoint: replaces
	if b.during(2*s) || !b.during(5*s+s/2) {
		t.Error("disjoint window not started")
	}
	b.announce(7*s, 7*s+s/8, s/4) // shortage shorter than the grace: nothing to count
	if b.during(7*s + s/16) {
		t.Error("window inside the grace counted")
	}
}

func TestConfigJSONRoundTripAndMerge(t *testing.T) {
	c := Config{Latency: 30 * time.Millisecond, ErrorRates: map[string]float64{KindInternal: 0.1}, StormFor: time.Second, Seed: 3}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if back.Latency != c.Latency || back.ErrorRates[KindInternal] != 0.1 || back.StormFor != time.Second || back.Seed != 3 {
		t.Fatalf("round trip %s -> %+v", b, back)
	}
	if err := json.Unmarshal([]byte(`{"jitter":"1ms"}`), &back); err != nil || back.Latency != c.Latency || back.Jitter != time.Millisecond {
		t.Fatalf("merge: %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"jitter":"1ms"} {}`), &back); err == nil {
		t.Fatal("trailing data accepted")
	}
}

func TestJitterStaysInRange(t *testing.T) {
	e := New(Config{Latency: 10 * time.Millisecond, Jitter: 5 * time.Millisecond}, nil)
	cfg := e.cfg.Load()
	for i := range int64(1000) {
		d := e.latency(cfg, "tok", i)
		if d < 10*time.Millisecond || d >= 15*time.Millisecond {
			t.Fatalf("latency %s outside [10ms, 15ms)", d)
		}
	}
}
