package rules

import (
	"encoding/json"
	"testing"
	"time"

	"pushfan/cron"
)

// Every message carries fcm_options.analytics_label: the request's, else
// the message's own fcm_options one, else the category's name; none
// without any; a label breaking FCM's rule, or one disagreeing with the
// message's own, is a 400 naming analytics_label.
func TestTheAnalyticsLabelOfEveryMessage(t *testing.T) {
	r := adRules(t)
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	all := &AudienceSpec{All: true}
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"the request's", Spec{Title: "t", Audience: all, Category: "service", AnalyticsLabel: "spring_sale-2026"}, "spring_sale-2026"},
		{"the category's", Spec{Title: "t", Audience: all, Category: "service"}, "service"},
		{"the message's own", Spec{Title: "t", Audience: all, Category: "service", FCMOptions: json.RawMessage(`{"analytics_label":"own"}`)}, "own"},
		{"both, agreeing", Spec{Title: "t", Audience: all, Category: "service", AnalyticsLabel: "x", FCMOptions: json.RawMessage(`{"analytics_label":"x"}`)}, "x"},
		{"the category's, beside other options", Spec{Title: "t", Audience: all, Category: "advertising", FCMOptions: json.RawMessage(`{}`)}, "advertising"},
		{"each variant's", Spec{Audience: all, Category: "service", Variants: []VariantSpec{{Name: "a", Weight: 1, Title: "a"}, {Name: "b", Weight: 1, Title: "b"}}}, "service"},
	} {
		req, err := r.Validate(tc.spec, now)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := req.Message.AnalyticsLabel(); got != tc.want {
			t.Fatalf("%s: label %q, want %q", tc.name, got, tc.want)
		}
		for i, v := range req.Message.Variants {
			if got := v.Message.AnalyticsLabel(); got != tc.want {
				t.Fatalf("%s: variant %d label %q, want %q", tc.name, i, got, tc.want)
			}
		}
	}
	// No category, no label asked: none (never one per broadcast).
	if req, err := (Rules{}).Validate(Spec{Title: "t", Audience: all}, now); err != nil || req.Message.AnalyticsLabel() != "" || req.Message.FCMOptions != nil {
		t.Fatalf("without a category: %v %s", err, req.Message.FCMOptions)
	}
	for _, bad := range []Spec{
		{Title: "t", Audience: all, Category: "service", AnalyticsLabel: "has space"},
		{Title: "t", Audience: all, Category: "service", AnalyticsLabel: "x123456789012345678901234567890123456789012345678901"},
		{Title: "t", Audience: all, Category: "service", AnalyticsLabel: "x", FCMOptions: json.RawMessage(`{"analytics_label":"y"}`)},
	} {
		if _, err := r.Validate(bad, now); fieldOf(err) != "analytics_label" {
			t.Fatalf("%q: %v, want a 400 naming analytics_label", bad.AnalyticsLabel, err)
		}
	}
}

// A cron job's analytics_label labels its fires' messages when it asks
// for one (over the category's name), its message's own fcm_options one
// otherwise, and the category's name without either; a bad one, or one
// disagreeing with the message's own, names analytics_label.
func TestAJobsAnalyticsLabel(t *testing.T) {
	r := adRules(t)
	fire := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	job := func(label string, opts map[string]any) *cron.Compiled {
		return &cron.Compiled{Loc: time.UTC, Job: cron.Job{Name: "digest", Audience: map[string]any{"all": true}, Category: "service",
			AnalyticsLabel: label, Message: cron.JobMessage{Title: "t", FCMOptions: opts}}}
	}
	for _, tc := range []struct {
		name  string
		label string
		opts  map[string]any
		want  string
	}{
		{"the job's", "weekly_digest", nil, "weekly_digest"},
		{"the job's message's own", "", map[string]any{"analytics_label": "own"}, "own"},
		{"both, agreeing", "x", map[string]any{"analytics_label": "x"}, "x"},
		{"the category's", "", nil, "service"},
	} {
		in, err := r.JobRequest(job(tc.label, tc.opts), fire)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := in.Message.AnalyticsLabel(); got != tc.want {
			t.Fatalf("%s: label %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, bad := range []*cron.Compiled{job("has space", nil), job("x", map[string]any{"analytics_label": "y"})} {
		if _, err := r.JobRequest(bad, fire); fieldOf(err) != "analytics_label" {
			t.Fatalf("job label %q: %v, want an error naming analytics_label", bad.AnalyticsLabel, err)
		}
	}
}
