package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/config"
	"pushfan/cron"
	"pushfan/internal/testsupport/teststack"
)

const internalToken = "internal-secret-0123456789"

func everySecondJob(name string) cron.Job {
	return cron.Job{Name: name, Schedule: "*/1 * * * * *", Timezone: "Asia/Seoul",
		Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "tick"}}
}

func TestCronFiresOnceAcrossTwoInstances(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Jobs = []cron.Job{everySecondJob("tick")}
	}})
	second := s.AddInstance()
	s.SeedTokens(1, tokens("ok-", 5))
	var rows []struct {
		FireTime time.Time `db:"fire_time"`
		N        int       `db:"n"`
	}
	fires := func() {
		t.Helper()
		rows = rows[:0]
		if err := s.SQL.Select(&rows, "SELECT fire_time, COUNT(*) AS n FROM broadcasts WHERE job_name = 'tick' GROUP BY fire_time ORDER BY fire_time"); err != nil {
			t.Fatal(err)
		}
	}
	// Three fires: the first two are a second old or more, so both
	// instances' schedulers have had their turn at them.
	waitUntil(t, "three fires of an every-second job", 20*time.Second, func() bool { fires(); return len(rows) >= 3 })
	// With both schedulers stopped no fire is in progress: the counts below
	// are final, not a snapshot a late duplicate could still join.
	stopScheduler(t, s.First)
	stopScheduler(t, second)
	fires()
	for i, r := range rows {
		if r.N != 1 {
			t.Fatalf("fire %v made %d broadcasts with two instances", r.FireTime, r.N)
		}
		if r.FireTime.Nanosecond() != 0 || (i > 0 && r.FireTime.Sub(rows[i-1].FireTime) != time.Second) {
			t.Fatalf("fire times %v", rows)
		}
	}
	var page listPage
	s.Do("GET", "/push/broadcasts?trigger=cron", nil, &page)
	if len(page.Broadcasts) < len(rows) || page.Broadcasts[0].Trigger != "cron" {
		t.Fatalf("cron broadcasts listed: %+v", page)
	}
}

// stopScheduler stops inst's scheduler, waiting for a fire in progress;
// the instance goes on serving and running broadcasts.
func stopScheduler(t *testing.T, inst *teststack.Instance) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := inst.App.Scheduler.Stop(ctx); err != nil {
		t.Fatalf("stopping the scheduler: %v", err)
	}
}

func TestCronMisfiresWithinAndBeyondCatchup(t *testing.T) {
	t.Parallel()
	// Last recorded fire ten hours ago; hourly job.
	last := time.Now().UTC().Truncate(time.Hour).Add(-10 * time.Hour)
	hourly := func(name string, catchup time.Duration) cron.Job {
		return cron.Job{Name: name, Schedule: "0 0 * * * *", Catchup: catchup, Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "hourly"}}
	}
	s := teststack.New(t, teststack.Options{
		Prepare: func(s *teststack.Stack) {
			s.MustExec("INSERT INTO cron_skipped_fires (job_name, fire_time) VALUES ('within', ?), ('beyond', ?)", last, last)
		},
		Configure: func(c *config.Config) {
			c.Jobs = []cron.Job{hourly("within", 2*time.Hour), hourly("beyond", time.Nanosecond)}
		},
	})
	newest := time.Now().UTC().Truncate(time.Hour)
	count := func(query string, args ...any) (n int) {
		t.Helper()
		if err := s.SQL.Get(&n, query, args...); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The scheduler catches up on its jobs in order at start: "within"
	// fires, then "beyond" records its missed fires skipped.
	waitUntil(t, `the catch-up: a fire of "within" and the skipped fires of "beyond" recorded`, 10*time.Second, func() bool {
		return count("SELECT COUNT(*) FROM broadcasts WHERE job_name = 'within'") > 0 &&
			count("SELECT COUNT(*) FROM cron_skipped_fires WHERE job_name = 'beyond' AND fire_time > ?", last) > 0
	})
	// Stopped, the scheduler cannot fire anything more: the counts below
	// are final (the next fire of either job is up to an hour away anyway).
	stopScheduler(t, s.First)
	var fired []time.Time
	if err := s.SQL.Select(&fired, "SELECT fire_time FROM broadcasts WHERE job_name = 'within'"); err != nil {
		t.Fatal(err)
	}
	if len(fired) != 1 || !fired[0].Equal(newest) {
		t.Fatalf("within the window: fired %v, want only %v", fired, newest)
	}
	skippedWithin := count("SELECT COUNT(*) FROM cron_skipped_fires WHERE job_name = 'within' AND fire_time > ?", last)
	skippedBeyond := count("SELECT COUNT(*) FROM cron_skipped_fires WHERE job_name = 'beyond' AND fire_time > ?", last)
	firedBeyond := count("SELECT COUNT(*) FROM broadcasts WHERE job_name = 'beyond'")
	if skippedWithin != 9 || skippedBeyond != 10 || firedBeyond != 0 {
		t.Fatalf("skipped within %d (want 9), beyond %d (want 10), fired beyond %d", skippedWithin, skippedBeyond, firedBeyond)
	}
	var jobs struct {
		Jobs []struct {
			Name      string      `json:"name"`
			NextFires []time.Time `json:"next_fires"`
			LastFire  *struct {
				FireTime    time.Time `json:"fire_time"`
				Skipped     bool      `json:"skipped"`
				BroadcastID uint64    `json:"broadcast_id"`
			} `json:"last_fire"`
		} `json:"jobs"`
	}
	s.Do("GET", "/push/cron", nil, &jobs)
	if len(jobs.Jobs) != 2 || len(jobs.Jobs[0].NextFires) != 5 || jobs.Jobs[0].NextFires[0] != newest.Add(time.Hour) {
		t.Fatalf("GET /push/cron %+v", jobs)
	}
	if lf := jobs.Jobs[0].LastFire; lf == nil || lf.Skipped || lf.BroadcastID == 0 || !lf.FireTime.Equal(newest) {
		t.Fatalf("last fire of within: %+v", lf)
	}
	if lf := jobs.Jobs[1].LastFire; lf == nil || !lf.Skipped || !lf.FireTime.Equal(newest) {
		t.Fatalf("last fire of beyond: %+v", lf)
	}
}

func TestInternalTrigger(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.InternalToken = internalToken
		c.Jobs = []cron.Job{{Name: "digest", Schedule: "0 9 * * MON", Timezone: "Asia/Seoul", Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "digest"}}}
	}})
	s.SeedTokens(1, tokens("ok-", 3))
	for tok, want := range map[string]int{"": 401, teststack.AdminToken: 401, "wrong-internal-0123456789": 401} {
		var e teststack.ErrorBody
		if resp := s.DoAuth("POST", "/internal/cron/digest", tok, nil, &e); resp.StatusCode != want || e.Error.Code != "unauthorized" {
			t.Fatalf("token %q: %d %+v", tok, resp.StatusCode, e)
		}
	}
	var e teststack.ErrorBody
	if resp := s.DoAuth("POST", "/internal/cron/nope", internalToken, nil, &e); resp.StatusCode != 404 || e.Error.Code != "unknown_job" {
		t.Fatalf("unknown job: %d %+v", resp.StatusCode, e)
	}
	type fired struct {
		ID       uint64    `json:"id"`
		JobName  string    `json:"job_name"`
		Trigger  string    `json:"trigger"`
		FireTime time.Time `json:"fire_time"`
	}
	// Without a body the fire time is the current minute.
	var now fired
	if resp := s.DoAuth("POST", "/internal/cron/digest", internalToken, nil, &now); resp.StatusCode != 200 || now.ID == 0 ||
		now.JobName != "digest" || now.Trigger != "cron" || now.FireTime.Second() != 0 || time.Since(now.FireTime) > 2*time.Minute {
		t.Fatalf("trigger now: %d %+v", resp.StatusCode, now)
	}
	// Again in the same minute: the same broadcast (if the minute turned in
	// between, the fire times differ and so may the broadcasts).
	var again fired
	s.DoAuth("POST", "/internal/cron/digest", internalToken, nil, &again)
	if again.FireTime.Equal(now.FireTime) != (again.ID == now.ID) {
		t.Fatalf("per-minute idempotency: %+v then %+v", now, again)
	}
	// The same fire twice is one broadcast.
	var a, b fired
	s.DoAuth("POST", "/internal/cron/digest", internalToken, `{"fire_time":"2026-01-05T09:00:00+09:00"}`, &a)
	resp := s.DoAuth("POST", "/internal/cron/digest", internalToken, `{"fire_time":"2026-01-05T00:00:00Z"}`, &b)
	if a.ID == 0 || a.ID != b.ID || a.ID == now.ID || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("same fire twice: %+v then %+v", a, b)
	}
}

// A subscriptions table and the renewal_due audience of the shipped example.
func renewalStack(t *testing.T) *teststack.Stack {
	defs := []audience.Definition{{
		Name:   "renewal_due",
		Params: map[string]string{"days_before": "int", "locale": "string"},
		SQL: "SELECT t.id AS `cursor`, t.user_id, t.token, s.plan, s.amount FROM device_tokens t " +
			"JOIN users u ON u.id = t.user_id JOIN subscriptions s ON s.user_id = t.user_id " +
			"WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1 AND u.locale = :locale " +
			"AND s.reminders = 1 AND s.renews_on = CURRENT_DATE + INTERVAL :days_before DAY ORDER BY t.id LIMIT :limit",
	}}
	return teststack.New(t, teststack.Options{
		Prepare: func(s *teststack.Stack) {
			s.MustExec(`CREATE TABLE subscriptions (user_id BIGINT UNSIGNED PRIMARY KEY, plan VARCHAR(32) NOT NULL,
				amount DECIMAL(10,2) NOT NULL, renews_on DATE NOT NULL, reminders TINYINT(1) NOT NULL DEFAULT 1)`)
			s.SeedTokens(1, tokens("ok-", 60))
			// Users 1-30 renew in 3 days; 1-20 opted in; plans "pro" and "x".
			for uid := 1; uid <= 30; uid++ {
				plan := "pro"
				if uid%5 == 0 {
					plan = "x"
				}
				s.MustExec("INSERT INTO subscriptions VALUES (?, ?, 9.90, UTC_DATE() + INTERVAL 3 DAY, ?)", uid, plan, uid <= 20)
			}
		},
		Configure: func(c *config.Config) { c.Audiences = defs },
	})
}

func TestNamedAudiencePersonalizedWithTemplateErrors(t *testing.T) {
	t.Parallel()
	s := renewalStack(t)
	params := map[string]any{"days_before": 3, "locale": "en"}
	var preview struct {
		Count  int64    `json:"count"`
		Sample []uint64 `json:"sample_user_ids"`
	}
	if resp := s.Do("POST", "/push/audiences/renewal_due/preview", map[string]any{"params": params}, &preview); resp.StatusCode != 200 || preview.Count != 20 || len(preview.Sample) != 10 {
		t.Fatalf("preview: %d %+v", resp.StatusCode, preview)
	}
	var b teststack.Broadcast
	// {{index .plan 2}} fails for the 2-letter... plan "x" has no index 2: those rows are TEMPLATE_ERROR.
	s.Do("POST", "/push/broadcast", map[string]any{
		"title":    "Your {{.plan}} plan renews soon",
		"body":     "{{.amount}} in 3 days ({{index .plan 2}})",
		"audience": map[string]any{"name": "renewal_due", "params": params},
	}, &b)
	if b.Status != "completed" || b.Targeted != preview.Count || b.Succeeded != 16 || b.Failed != 4 || b.Errors["TEMPLATE_ERROR"] != 4 || b.InvalidatedTokens != 0 {
		t.Fatalf("broadcast %+v (preview count %d)", b, preview.Count)
	}
	if got := s.Emu.Stats().Accepted; got != 16 {
		t.Fatalf("emulator accepted %d, want 16 (template failures are not sent)", got)
	}
}

func TestNamedAudienceParamsAndInjection(t *testing.T) {
	t.Parallel()
	s := renewalStack(t)
	cases := []struct {
		params map[string]any
		field  string
	}{
		{map[string]any{"days_before": 3}, "audience.params.locale"},
		{map[string]any{"days_before": "3", "locale": "en"}, "audience.params.days_before"},
		{map[string]any{"days_before": 3.5, "locale": "en"}, "audience.params.days_before"},
		{map[string]any{"days_before": 3, "locale": "en", "extra": 1}, "audience.params.extra"},
	}
	for _, c := range cases {
		var e teststack.ErrorBody
		resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"name": "renewal_due", "params": c.params}}, &e)
		if resp.StatusCode != 400 || e.Error.Code != "invalid_params" || e.Error.Field != c.field {
			t.Errorf("params %v: %d %+v, want field %s", c.params, resp.StatusCode, e, c.field)
		}
	}
	var e teststack.ErrorBody
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"name": "nope"}}, &e); resp.StatusCode != 400 || e.Error.Code != "unknown_audience" {
		t.Fatalf("unknown audience: %d %+v", resp.StatusCode, e)
	}
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "{{.missing}}", "audience": map[string]any{"name": "renewal_due", "params": map[string]any{"days_before": 3, "locale": "en"}}}, &e); resp.StatusCode != 400 || e.Error.Code != "template_error" || e.Error.Field != "title" {
		t.Fatalf("unknown template variable: %d %+v", resp.StatusCode, e)
	}
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "{{.plan}", "audience": map[string]any{"all": true}}, &e); resp.StatusCode != 400 || e.Error.Code != "template_error" {
		t.Fatalf("template that does not parse: %d %+v", resp.StatusCode, e)
	}
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"name": "renewal_due",
		"params": map[string]any{"days_before": 3, "locale": "en' OR '1'='1"}}}, &b)
	var users int
	s.SQL.Get(&users, "SELECT COUNT(*) FROM users")
	if b.Status != "completed" || b.Targeted != 0 || s.Emu.Stats().Requests != 0 || users != 60 {
		t.Fatalf("injection attempt: %+v, %d requests, %d users", b, s.Emu.Stats().Requests, users)
	}
	var list struct {
		BuiltIn []string `json:"built_in"`
		Named   []struct {
			Name   string            `json:"name"`
			Params map[string]string `json:"params"`
			Vars   []string          `json:"vars"`
		} `json:"named"`
	}
	s.Do("GET", "/push/audiences", nil, &list)
	if len(list.Named) != 1 || list.Named[0].Params["days_before"] != "int" || strings.Join(list.Named[0].Vars, ",") != "plan,amount" {
		t.Fatalf("audiences %+v", list)
	}
}
