package config

import "testing"

// A job's analytics_label is read from the YAML as written (its rule is
// checked with the job's other fields, as a request's: broadcast/rules).
func TestAJobsAnalyticsLabelLoads(t *testing.T) {
	cfg, err := loadCategoriesYAML(t, `jobs:
  - name: digest
    schedule: "0 9 * * MON"
    audience: {all: true}
    analytics_label: weekly_digest
    message: {title: "t"}
  - name: plain
    schedule: "0 9 * * MON"
    audience: {all: true}
    message: {title: "t"}
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Jobs) != 2 || cfg.Jobs[0].AnalyticsLabel != "weekly_digest" || cfg.Jobs[1].AnalyticsLabel != "" {
		t.Fatalf("jobs %+v", cfg.Jobs)
	}
}
