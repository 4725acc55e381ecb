package app_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"pushfan/audience"
	"pushfan/cmd/pushfan/app"
	"pushfan/config"
	"pushfan/cron"
	"pushfan/internal/testsupport/testdb"
)

func baseConfig(dsn string) config.Config {
	cfg := config.Defaults()
	cfg.MySQLDSN = dsn
	cfg.FCMEndpoint = "http://127.0.0.1:1/v1" // never contacted here
	cfg.FCMProjectID = "test"
	return cfg
}

func TestStartupRefusesBadAudiencesAndJobs(t *testing.T) {
	tdb := testdb.New(t)
	pool, dsn := tdb.SQL, tdb.DSN
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := map[string]func(*config.Config){
		"no_such_table": func(c *config.Config) {
			c.Audiences = []audience.Definition{{Name: "no_such_table", SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM nope t WHERE t.id > :after ORDER BY t.id LIMIT :limit"}}
		},
		"missing_token": func(c *config.Config) {
			c.Audiences = []audience.Definition{{Name: "missing_token", SQL: "SELECT t.id AS `cursor`, t.user_id FROM device_tokens t WHERE t.id > :after ORDER BY t.id LIMIT :limit"}}
		},
		"bad_job_audience": func(c *config.Config) {
			c.Jobs = []cron.Job{{Name: "bad_job_audience", Schedule: "0 9 * * *", Audience: map[string]any{"name": "unknown"}, Message: cron.JobMessage{Title: "x"}}}
		},
		"bad_job_pace": func(c *config.Config) {
			c.Jobs = []cron.Job{{Name: "bad_job_pace", Schedule: "0 9 * * *", Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "x"}, MaxRate: 1e9}}
		},
		"bad_job_class": func(c *config.Config) {
			c.Jobs = []cron.Job{{Name: "bad_job_class", Schedule: "0 9 * * *", Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "x"}, Class: "urgent"}}
		},
		"bad_job_template": func(c *config.Config) {
			c.Jobs = []cron.Job{{Name: "bad_job_template", Schedule: "0 9 * * *", Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "{{.x"}}}
		},
	}
	for name, configure := range cases {
		cfg := baseConfig(dsn)
		configure(&cfg)
		inst, err := app.New(context.Background(), cfg, pool, log)
		if err == nil {
			inst.Sender.Close()
			t.Errorf("%s: started", name)
			continue
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error does not name it: %v", name, err)
		}
	}
}
