package fcmemu_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"firebase.google.com/go/v4/errorutils"
	"firebase.google.com/go/v4/messaging"

	"pushfan/fcmemu"
)

// assertProjectQuota checks err is the project-quota 429 as the SDK sees it and returns its
// Retry-After in seconds.
func assertProjectQuota(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		t.Fatal("send succeeded, want a project-quota 429")
	}
	if messaging.IsQuotaExceeded(err) {
		t.Fatalf("IsQuotaExceeded true for the project shape: %v", err)
	}
	if !errorutils.IsResourceExhausted(err) {
		t.Fatalf("IsResourceExhausted false: %v", err)
	}
	resp := errorutils.HTTPResponse(err)
	if resp == nil || resp.StatusCode != 429 {
		t.Fatalf("response %v", resp)
	}
	var body rpcStatus
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.detail("type.googleapis.com/google.firebase.fcm.v1.FcmError") != nil {
		t.Fatalf("project shape carries an FcmError: %+v", body)
	}
	info := body.detail("type.googleapis.com/google.rpc.ErrorInfo")
	if info == nil || info["reason"] != "RATE_LIMIT_EXCEEDED" || info["domain"] != "googleapis.com" {
		t.Fatalf("ErrorInfo %v", info)
	}
	md, _ := info["metadata"].(map[string]any)
	if md["service"] != "fcm.googleapis.com" || md["quota_limit"] == nil {
		t.Fatalf("ErrorInfo metadata %v", md)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	return ra
}

func TestQuotaWindow(t *testing.T) {
	t.Parallel()
	window := 3 * time.Second // long enough that a loaded machine still sends 7 requests within it
	// Grace off: this test's early retry is deliberate and must be counted.
	_, ts := startEmu(t, fcmemu.Config{QuotaLimit: 5, QuotaWindow: window, BackoffGrace: -1})
	c := sdkClient(t, ts.URL)
	for i := range 5 {
		if _, err := send(t, c, fmt.Sprintf("q-%d", i)); err != nil {
			t.Fatalf("send %d within quota: %v", i, err)
		}
	}
	_, err := send(t, c, "q-over")
	if ra := assertProjectQuota(t, err); time.Duration(ra)*time.Second > window+time.Second-1 {
		t.Fatalf("Retry-After %d s exceeds the window rounded up", ra)
	}
	// Coming back at once is refused again and recorded as ignoring Retry-After.
	_, err = send(t, c, "q-over")
	ra := assertProjectQuota(t, err)
	if s := stats(t, ts.URL); s.RequestsDuringProjectBackoff != 1 || s.RequestsDuringBackoff != 1 {
		t.Fatalf("backoff counters %+v, want 1", s)
	}
	// Honouring Retry-After lands in a fresh window (the sleep is the subject).
	time.Sleep(time.Duration(ra) * time.Second)
	if _, err := send(t, c, "q-over"); err != nil {
		t.Fatalf("after Retry-After: %v", err)
	}
	s := stats(t, ts.URL)
	if s.RequestsDuringBackoff != 1 || s.ByCode["RATE_LIMIT_EXCEEDED"] != 2 || s.Accepted != 6 {
		t.Fatalf("stats %+v", s)
	}
}

func TestStormStartedByPutConfig(t *testing.T) {
	t.Parallel()
	_, ts := startEmu(t, fcmemu.Config{})
	c := sdkClient(t, ts.URL)
	for i := range 3 { // before the storm is armed: counted, but they do not trigger it
		if _, err := send(t, c, fmt.Sprintf("pre-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	putConfig(t, ts.URL, `{"storm_after": 2, "storm_for": "1500ms"}`)
	var cfg fcmemu.Config
	getJSON(t, ts.URL+"/emulator/config", &cfg)
	if cfg.StormAfter != 2 || cfg.StormFor != 1500*time.Millisecond {
		t.Fatalf("config after PUT: %+v", cfg)
	}
	for i := range 2 {
		if _, err := send(t, c, fmt.Sprintf("armed-%d", i)); err != nil {
			t.Fatalf("send %d before the storm: %v", i, err)
		}
	}
	_, err := send(t, c, "storm-1")
	ra := assertProjectQuota(t, err)
	if ra > 2 {
		t.Fatalf("Retry-After %d, want at most the storm's 1.5 s rounded up", ra)
	}
	s := stats(t, ts.URL)
	if s.StormStartedAt == nil || s.StormEndsAt == nil || s.StormEndsAt.Sub(*s.StormStartedAt) != 1500*time.Millisecond {
		t.Fatalf("storm times %v %v", s.StormStartedAt, s.StormEndsAt)
	}
	time.Sleep(time.Duration(ra) * time.Second) // honouring Retry-After, the subject: the storm is over by then
	if _, err := send(t, c, "storm-1"); err != nil {
		t.Fatalf("after the storm: %v", err)
	}
	if s := stats(t, ts.URL); s.RequestsDuringBackoff != 0 || s.ByCode["RATE_LIMIT_EXCEEDED"] != 1 || s.Accepted != 6 {
		t.Fatalf("stats %+v", s)
	}
}

// A pool of concurrent senders that pauses on Retry-After leaves RequestsDuringBackoff at 0 (the
// default grace absorbs requests already on the wire), while a client that ignores it is caught.
func TestRequestsDuringBackoffTellsClientsApart(t *testing.T) {
	t.Parallel()
	stormCfg := fcmemu.Config{Latency: 2 * time.Millisecond, StormAfter: 100, StormFor: time.Second}

	t.Run("honouring pool", func(t *testing.T) {
		t.Parallel()
		_, ts := startEmu(t, stormCfg)
		c := sdkClient(t, ts.URL)
		var (
			pauseUntil atomic.Int64 // unix nanos
			accepted   atomic.Int64
			limited    atomic.Int64
			wg         sync.WaitGroup
		)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil && (limited.Load() == 0 || accepted.Load() < 300); i++ {
					// Re-check after sleeping: another worker may have extended the pause.
					for d := time.Until(time.Unix(0, pauseUntil.Load())); d > 0; d = time.Until(time.Unix(0, pauseUntil.Load())) {
						time.Sleep(d)
					}
					_, err := c.Send(ctx, msg(fmt.Sprintf("w%d-%d", w, i)))
					switch {
					case err == nil:
						accepted.Add(1)
					case errorutils.IsResourceExhausted(err):
						limited.Add(1)
						ra, _ := strconv.Atoi(errorutils.HTTPResponse(err).Header.Get("Retry-After"))
						until := time.Now().Add(time.Duration(ra) * time.Second).UnixNano()
						for old := pauseUntil.Load(); until > old && !pauseUntil.CompareAndSwap(old, until); old = pauseUntil.Load() {
						}
					default:
						t.Errorf("send: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		s := stats(t, ts.URL)
		if s.ByCode["RATE_LIMIT_EXCEEDED"] == 0 {
			t.Fatalf("no storm seen: %+v", s)
		}
		if s.RequestsDuringBackoff != 0 {
			t.Fatalf("RequestsDuringBackoff = %d for a client that honours Retry-After", s.RequestsDuringBackoff)
		}
	})

	t.Run("ignoring client", func(t *testing.T) {
		t.Parallel()
		_, ts := startEmu(t, fcmemu.Config{StormAfter: 0, StormFor: time.Second})
		c := sdkClient(t, ts.URL)
		// Retries every 50 ms for the length of the storm, ignoring Retry-After.
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			_, _ = send(t, c, "impatient")
		}
		if s := stats(t, ts.URL); s.RequestsDuringProjectBackoff == 0 {
			t.Fatalf("an impatient client went unnoticed: %+v", s)
		}
	})
}
