package server_test

import (
	"sync"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/cron"
	"pushfan/internal/testsupport/teststack"
)

// A paused job fires on no instance: two instances run the scheduler of an
// every-second job, one is paused through the API, and no broadcast of it
// is made on either (nor on a third instance started after the pause:
// the pause is in the database) while its fires are recorded skipped;
// resumed, it fires again. Both changes are in the audit trail.
func TestCronPauseHoldsOnEveryInstance(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Jobs = []cron.Job{everySecondJob("tick")}
	}})
	s.AddInstance()
	s.SeedTokens(1, tokens("ok-", 2))
	count := func(q string) int {
		t.Helper()
		var n int
		if err := s.SQL.Get(&n, q); err != nil {
			t.Fatal(err)
		}
		return n
	}
	made := func() int { return count("SELECT COUNT(*) FROM broadcasts WHERE job_name = 'tick'") }
	waitUntil(t, "a first fire", 20*time.Second, func() bool { return made() >= 1 })

	var job struct {
		Name   string `json:"name"`
		Paused bool   `json:"paused"`
	}
	if resp := s.Do("POST", "/push/cron/tick/pause", nil, &job); resp.StatusCode != 200 || !job.Paused {
		t.Fatalf("pause: %d %+v", resp.StatusCode, job)
	}
	s.AddInstance() // a restart: it reads the pause from the database
	// A fire already past its pause check when the pause committed may
	// still land: wait for two recorded skips, then the count is final.
	skipped := func() int {
		return count("SELECT COUNT(*) FROM cron_skipped_fires WHERE job_name = 'tick' AND reason = 'paused'")
	}
	waitUntil(t, "two paused fires recorded skipped", 20*time.Second, func() bool { return skipped() >= 2 })
	before, skips := made(), skipped()
	waitUntil(t, "three more paused fires recorded skipped", 30*time.Second, func() bool { return skipped() >= skips+3 })
	if after := made(); after != before {
		t.Fatalf("a paused job made %d broadcasts while three instances skipped %d fires", after-before, skipped()-skips)
	}
	var list struct {
		Jobs []struct {
			Name   string `json:"name"`
			Paused bool   `json:"paused"`
		} `json:"jobs"`
	}
	if s.Do("GET", "/push/cron", nil, &list); len(list.Jobs) != 1 || !list.Jobs[0].Paused {
		t.Fatalf("the list: %+v", list)
	}

	if resp := s.Do("POST", "/push/cron/tick/resume", nil, &job); resp.StatusCode != 200 || job.Paused {
		t.Fatalf("resume: %d %+v", resp.StatusCode, job)
	}
	waitUntil(t, "a fire after the resume", 20*time.Second, func() bool { return made() > before })
	for _, action := range []string{"job.pause", "job.resume"} {
		if n := count("SELECT COUNT(*) FROM audit_entries WHERE action = '" + action + "' AND target = 'job:tick'"); n != 1 {
			t.Errorf("%d %s entries, want 1", n, action)
		}
	}
}

// Run now, clicked twice at once, makes one broadcast: the clicks share
// the minute's fire key, and the second answers the first's broadcast,
// marked replayed. It runs a paused job too (the admin asked for it).
func TestCronRunNowOnceForTwoClicks(t *testing.T) {
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Jobs = []cron.Job{{Name: "digest", Schedule: "0 9 * * MON", Timezone: "Asia/Seoul", Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "digest"}}}
	}})
	s.SeedTokens(1, tokens("ok-", 3))
	if resp := s.Do("POST", "/push/cron/digest/pause", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("pause: %d", resp.StatusCode)
	}
	type fired struct {
		ID       uint64    `json:"id"`
		JobName  string    `json:"job_name"`
		FireTime time.Time `json:"fire_time"`
	}
	// Two clicks at once; when the minute turns between them they are two
	// fires by design, so the pair is tried again (at most three times).
	for attempt := 1; ; attempt++ {
		var got [2]fired
		var replayed [2]bool
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				resp := s.Do("POST", "/push/cron/digest/run", nil, &got[i])
				replayed[i] = resp.Header.Get("Idempotent-Replayed") == "true"
				if resp.StatusCode != 200 {
					t.Errorf("run %d: %d", i, resp.StatusCode)
				}
			})
		}
		wg.Wait()
		if !got[0].FireTime.Equal(got[1].FireTime) && attempt < 3 {
			continue
		}
		var n int
		if err := s.SQL.Get(&n, "SELECT COUNT(*) FROM broadcasts WHERE job_name = 'digest' AND fire_time = ?", got[0].FireTime); err != nil {
			t.Fatal(err)
		}
		if got[0].ID == 0 || got[0].ID != got[1].ID || n != 1 || replayed[0] == replayed[1] || got[0].JobName != "digest" {
			t.Fatalf("two clicks: %+v replayed %v, %d broadcasts of that fire", got, replayed, n)
		}
		break
	}
	var n int
	if err := s.SQL.Get(&n, "SELECT COUNT(*) FROM audit_entries WHERE action = 'job.run' AND target = 'job:digest'"); err != nil || n < 2 {
		t.Fatalf("%d job.run entries (%v), want one a click", n, err)
	}
}
