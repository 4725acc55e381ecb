package cron

import (
	"errors"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func validJob(name string) Job {
	return Job{
		Name: name, Schedule: "0 9 * * MON", Timezone: "Asia/Seoul",
		Audience: map[string]any{"all": true}, Message: JobMessage{Title: "Weekly digest"},
	}
}

func TestCompileValid(t *testing.T) {
	off := false
	jobs := []Job{validJob("weekly_digest"), validJob("renewal-reminder-3d")}
	jobs[1].Schedule = "*/1 * * * * *"
	jobs[1].Timezone = ""
	jobs[1].Enabled = &off
	jobs[1].Catchup = time.Hour
	jobs[1].Message = JobMessage{Data: map[string]string{"kind": "renewal"}}
	cs, err := Compile(jobs)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Name != "weekly_digest" || cs[1].Name != "renewal-reminder-3d" {
		t.Fatalf("compiled %v", cs)
	}
	if !cs[0].Enabled() || cs[1].Enabled() {
		t.Errorf("Enabled: %v %v, want true false", cs[0].Enabled(), cs[1].Enabled())
	}
	if cs[0].Loc.String() != "Asia/Seoul" || cs[1].Loc != time.UTC {
		t.Errorf("Loc: %v %v", cs[0].Loc, cs[1].Loc)
	}
	if cs[0].sched == nil || cs[1].Catchup != time.Hour {
		t.Errorf("compiled fields: %+v", cs[1])
	}
	if cs, err := Compile(nil); err != nil || len(cs) != 0 {
		t.Errorf("Compile(nil) = %v, %v", cs, err)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Job)
		want   string // substring of the error
	}{
		{"bad schedule", func(j *Job) { j.Schedule = "0 9 * * MOON" }, `cron job "job" (jobs[0]): schedule "0 9 * * MOON"`},
		{"too many fields", func(j *Job) { j.Schedule = "0 0 9 * * MON 2026" }, `schedule "0 0 9 * * MON 2026"`},
		{"empty schedule", func(j *Job) { j.Schedule = " " }, "schedule is required"},
		{"TZ prefix", func(j *Job) { j.Schedule = "CRON_TZ=Asia/Seoul 0 9 * * *" }, "set timezone instead"},
		{"never fires", func(j *Job) { j.Schedule = "0 0 30 2 *" }, "never fires"},
		{"bad zone", func(j *Job) { j.Timezone = "Asia/Seul" }, `timezone "Asia/Seul"`},
		{"Local zone", func(j *Job) { j.Timezone = "Local" }, `timezone "Local" depends on the host`},
		{"empty message", func(j *Job) { j.Message = JobMessage{Image: "https://x/y.png"} }, "message needs at least one of title, body or data"},
		{"no audience", func(j *Job) { j.Audience = nil }, "audience is required"},
		{"audience not JSON", func(j *Job) { j.Audience = map[string]any{"params": map[any]any{1: "x"}} }, "audience cannot be passed on as JSON"},
		{"negative catchup", func(j *Job) { j.Catchup = -time.Minute }, "catchup must not be negative, got -1m0s"},
		{"bad name", func(j *Job) { j.Name = "Weekly Digest" }, `cron job "Weekly Digest" (jobs[0]): name must be`},
		{"long name", func(j *Job) { j.Name = strings.Repeat("a", 65) }, "name must be 1 to 64"},
		{"no name", func(j *Job) { j.Name = "" }, "cron job jobs[0]: name is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := validJob("job")
			tt.mutate(&j)
			cs, err := Compile([]Job{j})
			if err == nil {
				t.Fatalf("no error; compiled %+v", cs[0])
			}
			if cs != nil {
				t.Errorf("jobs returned with an error: %v", cs)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\ndoes not contain %q", err, tt.want)
			}
		})
	}
	j := validJob(strings.Repeat("a", 64))
	if _, err := Compile([]Job{j}); err != nil {
		t.Errorf("64-character name: %v", err)
	}
}

func TestCompileJoinsEveryError(t *testing.T) {
	dup := validJob("digest")
	badZone := validJob("zoned")
	badZone.Timezone = "Mars/Olympus"
	twoProblems := validJob("two")
	twoProblems.Schedule = "61 * * * *"
	twoProblems.Message = JobMessage{}
	_, err := Compile([]Job{validJob("digest"), dup, badZone, twoProblems})
	if err == nil {
		t.Fatal("no error")
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 4 {
		t.Fatalf("want 4 joined errors, got %v", err)
	}
	for _, want := range []string{
		`cron job "digest" (jobs[1]): duplicate name: jobs[0] has it too`,
		`cron job "zoned" (jobs[2]): timezone "Mars/Olympus"`,
		`cron job "two" (jobs[3]): schedule "61 * * * *"`,
		`cron job "two" (jobs[3]): message needs`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

const exampleYAML = `
jobs:
  - name: weekly_digest
    schedule: "0 9 * * MON"
    timezone: Asia/Seoul
    enabled: true
    catchup: 1h
    audience: {all: true}
    class: bulk
    max_rate: 500
    deliver_over: 30m
    message: {title: "Your week", body: "Hi {{.name}}", image: "https://example.com/a.png", data: {kind: digest, n: 3}}
  - name: renewal_due_3d
    schedule: "0 0 10 * * *"
    audience: {name: renewal_due, params: {days_before: 3}}
    catchup: 0
    enabled: false
    message:
      body: "Your plan renews in 3 days"
  - name: every_second
    schedule: "*/1 * * * * *"
    audience: {user_ids: [1, 2, 3]}
    message: {title: t}
`

func TestYAML(t *testing.T) {
	var cfg struct {
		Jobs []Job `yaml:"jobs"`
	}
	dec := yaml.NewDecoder(strings.NewReader(exampleYAML))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	j := cfg.Jobs
	if len(j) != 3 {
		t.Fatalf("%d jobs", len(j))
	}
	if j[0].Catchup != time.Hour || j[1].Catchup != 0 || j[2].Catchup != 0 {
		t.Errorf("catchup: %v %v %v", j[0].Catchup, j[1].Catchup, j[2].Catchup)
	}
	if j[0].Class != "bulk" || j[0].MaxRate != 500 || j[0].DeliverOver != 30*time.Minute || j[1].Class != "" || j[1].MaxRate != 0 || j[1].DeliverOver != 0 {
		t.Errorf("class and pace: %q %v %v; %q %v %v", j[0].Class, j[0].MaxRate, j[0].DeliverOver, j[1].Class, j[1].MaxRate, j[1].DeliverOver)
	}
	if j[0].Message.Data["n"] != "3" || j[0].Message.Body != "Hi {{.name}}" || j[0].Message.Image == "" {
		t.Errorf("message: %+v", j[0].Message)
	}
	if j[1].Audience["name"] != "renewal_due" || j[1].Audience["params"].(map[string]any)["days_before"] != 3 {
		t.Errorf("audience: %#v", j[1].Audience)
	}
	cs, err := Compile(j)
	if err != nil {
		t.Fatal(err)
	}
	if !cs[0].Enabled() || cs[1].Enabled() || !cs[2].Enabled() {
		t.Errorf("enabled: %v %v %v", cs[0].Enabled(), cs[1].Enabled(), cs[2].Enabled())
	}
	if got := cs[0].Next(time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)); got.Format(time.RFC3339) != "2026-03-09T00:00:00Z" {
		t.Errorf("weekly_digest next = %s", got)
	}

	for _, tt := range []struct{ doc, want string }{
		{"name: x\ncatchup: 3600\n", `"3600" is not a duration`},
		{"name: x\ncatchup: soon\n", `"soon" is not a duration`},
		{"name: x\ncatchup: [1h]\n", "want a duration"},
		{"name: x\ndeliver_over: 1800\n", `deliver_over: line 2: "1800" is not a duration`},
		{"name: x\nmax_rate: fast\n", "cannot unmarshal"},
		{"name: x\nshedule: '* * * * *'\n", `unknown key "shedule" in cron job`},
		{"name: x\nmessage: {title: t, bdy: b}\n", `unknown key "bdy" in cron job message`},
		{"name: x\nmessage: hello\n", "cron job message must be a mapping"},
		{"name: x\nmessage: {title: t, localized: {ko: {title: a, image: b}}}\n", `unknown key "image" in cron job message localized variant`},
		{"name: x\nmessage: {title: t, localized: {ko: hello}}\n", "cron job message localized variant must be a mapping"},
		{"- x\n", "cron job must be a mapping"},
		{"name: x\nname: y\n", `mapping key "name" already defined`},
	} {
		var job Job
		err := yaml.Unmarshal([]byte(tt.doc), &job)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.doc, err, tt.want)
		}
	}
	var job Job
	if err := yaml.Unmarshal([]byte("name: x\ncatchup: 90s\nmessage:\n"), &job); err != nil || job.Catchup != 90*time.Second {
		t.Errorf("catchup 90s: %v %v", job.Catchup, err)
	}
	if err := yaml.Unmarshal([]byte("name: x\nmessage: {title: t, localized: {ko: {title: 안녕, body: b}, pt-BR: {body: c}}}\n"), &job); err != nil ||
		job.Message.Localized["ko"] != (JobLocalized{Title: "안녕", Body: "b"}) || job.Message.Localized["pt-BR"] != (JobLocalized{Body: "c"}) {
		t.Errorf("localized: %+v %v", job.Message.Localized, err)
	}
}

// A job message carries FCM's platform overrides as plain YAML maps, which
// the API layer validates as it does a request's.
func TestYAMLPlatformOverrides(t *testing.T) {
	doc := `name: promo
message:
  title: t
  android: {priority: HIGH, ttl: 600s, notification: {channel_id: promo}}
  apns: {headers: {apns-priority: "5"}, payload: {aps: {badge: 3}}}
  webpush: {fcm_options: {link: "https://example.com/sale"}}
  fcm_options: {analytics_label: x}
`
	var job Job
	if err := yaml.Unmarshal([]byte(doc), &job); err != nil {
		t.Fatal(err)
	}
	m := job.Message
	n, _ := m.Android["notification"].(map[string]any)
	aps, _ := m.APNS["payload"].(map[string]any)["aps"].(map[string]any)
	if m.Android["priority"] != "HIGH" || m.Android["ttl"] != "600s" || n["channel_id"] != "promo" || aps["badge"] != 3 ||
		m.Webpush["fcm_options"].(map[string]any)["link"] != "https://example.com/sale" || m.FCMOptions["analytics_label"] != "x" {
		t.Fatalf("message: %#v", m)
	}
	if err := yaml.Unmarshal([]byte("name: x\nmessage: {title: t, andriod: {priority: HIGH}}\n"), &job); err == nil || !strings.Contains(err.Error(), `unknown key "andriod"`) {
		t.Fatalf("a misspelled override: %v", err)
	}
}

func TestJobLocalTimeKeys(t *testing.T) {
	var job Job
	if err := yaml.Unmarshal([]byte("name: x\nlocal_time: \"09:00\"\nquiet_hours: {start: \"22:00\", end: \"08:00\"}\nmessage: {title: t}\n"), &job); err != nil ||
		job.LocalTime != "09:00" || job.QuietHours == nil || job.QuietHours.Start != "22:00" || job.QuietHours.End != "08:00" {
		t.Fatalf("%+v %v", job, err)
	}
}

// quiet_hours: false or null switches the default off, as in the API; a
// bare key is null in YAML. Anything but a window, false or null is an
// error, and a window is as strict as the job.
func TestJobQuietHoursOff(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		off  bool
	}{
		{"name: x\nmessage: {title: t}\n", false},
		{"name: x\nquiet_hours: false\nmessage: {title: t}\n", true},
		{"name: x\nquiet_hours: null\nmessage: {title: t}\n", true},
		{"name: x\nquiet_hours: ~\nmessage: {title: t}\n", true},
		{"name: x\nquiet_hours:\nmessage: {title: t}\n", true},
	} {
		var job Job
		if err := yaml.Unmarshal([]byte(tc.yaml), &job); err != nil || job.NoQuietHours != tc.off || job.QuietHours != nil {
			t.Errorf("%q: %+v %v, want NoQuietHours %v and no window", tc.yaml, job, err, tc.off)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"name: x\nquiet_hours: true\nmessage: {title: t}\n", "true is not a window"},
		{"name: x\nquiet_hours: \"22:00-08:00\"\nmessage: {title: t}\n", "want {start"},
		{"name: x\nquiet_hours: {start: \"22:00\", stop: \"08:00\"}\nmessage: {title: t}\n", `unknown key "stop"`},
	} {
		var job Job
		if err := yaml.Unmarshal([]byte(tc.yaml), &job); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "quiet_hours") {
			t.Errorf("%q: %v, want an error on quiet_hours saying %q", tc.yaml, err, tc.want)
		}
	}
}
