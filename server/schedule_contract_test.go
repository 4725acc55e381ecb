package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"pushfan/broadcast"
	"pushfan/broadcast/rules"
	"pushfan/cron"
	"pushfan/model"
	"pushfan/server"
)

// fakeSchedule answers edits as the broadcast service would: err when
// set, else the stored broadcast with the edit's title.
type fakeSchedule struct {
	*fakeDomain // the submitter it extends
	f           *fakeDomain
	err         error
	edits       []broadcast.EditSpec
}

func (s *fakeSchedule) Edit(ctx context.Context, id uint64, e broadcast.EditSpec) (*model.Broadcast, error) {
	s.edits = append(s.edits, e)
	if s.err != nil {
		return nil, s.err
	}
	b, err := s.f.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	b.Message.Title = e.Title
	return b, nil
}

// The edit route: a sender's edit answers the broadcast; the domain's
// refusals are 409s with their codes; a field error is the submit's 400
// naming the field; an unknown field is refused before the domain.
func TestContractEditScheduledBroadcast(t *testing.T) {
	f := &fakeDomain{stored: map[uint64]*model.Broadcast{}}
	at := time.Now().Add(time.Hour).UTC()
	f.stored[9] = &model.Broadcast{ID: 9, Status: model.StatusScheduled, Submission: model.Submission{App: "consumer", SendAt: &at, Message: model.Message{Title: "old"}}}
	fs := &fakeSchedule{fakeDomain: f, f: f}
	h := contractServer(t, f, func(d *server.Domain) { d.Submitter = fs })

	rec, out := call(t, h, http.MethodPatch, "/push/broadcasts/9", contractSender, `{"title":"new","send_at":"`+at.Add(time.Hour).Format(time.RFC3339)+`"}`, "Content-Type", "application/json")
	if rec.Code != http.StatusOK || out["message"].(map[string]any)["title"] != "new" || len(fs.edits) != 1 {
		t.Fatalf("edit: %d %v (edits %d)", rec.Code, out, len(fs.edits))
	}
	rec, out = call(t, h, http.MethodPatch, "/push/broadcasts/9", contractSender, `{"title":"x","audience":{"all":true}}`, "Content-Type", "application/json")
	wantError(t, rec, out, http.StatusBadRequest, "unknown_field", "audience")
	for _, c := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("broadcast 9 is planning: %w", broadcast.ErrStarted), "already_started"},
		{fmt.Errorf("broadcast 9: %w", broadcast.ErrReleased), "already_released"},
		{fmt.Errorf("it has A/B variants: %w", broadcast.ErrNotEditable), "not_editable"},
		{fmt.Errorf("broadcast 9: %w", rules.ErrEditFourEyes), "four_eyes_required"},
	} {
		fs.err = c.err
		rec, out = call(t, h, http.MethodPatch, "/push/broadcasts/9", contractSender, `{"title":"x"}`, "Content-Type", "application/json")
		wantError(t, rec, out, http.StatusConflict, c.code, "")
	}
	fs.err = &rules.FieldError{Code: "send_at_in_past", Field: "send_at", Message: "send_at is not in the future"}
	rec, out = call(t, h, http.MethodPatch, "/push/broadcasts/9", contractSender, `{"title":"x","send_at":"2020-01-01T00:00:00Z"}`, "Content-Type", "application/json")
	wantError(t, rec, out, http.StatusBadRequest, "send_at_in_past", "send_at")
	if n := len(fs.edits); n != 6 {
		t.Errorf("the domain saw %d edits, want 6 (the unknown field refused before it)", n)
	}
}

// fakeControl pauses and runs jobs in memory, a submitter that controls
// jobs.
type fakeControl struct {
	*fakeDomain
	paused map[string]bool
	runs   int
}

func (c *fakeControl) RunJob(_ context.Context, j *cron.Compiled) (*model.Broadcast, bool, error) {
	c.runs++
	return &model.Broadcast{ID: 40, Status: model.StatusQueued, Submission: model.Submission{App: "consumer", JobName: j.Name}}, c.runs > 1, nil
}

func (c *fakeControl) PauseJob(_ context.Context, job string, paused bool, _ string) (bool, error) {
	changed := c.paused[job] != paused
	c.paused[job] = paused
	return changed, nil
}

func (c *fakeControl) JobPauses(context.Context) (map[string]model.JobPause, error) {
	out := map[string]model.JobPause{}
	for j, p := range c.paused {
		if p {
			out[j] = model.JobPause{At: time.Unix(1700000000, 0).UTC(), By: "ops"}
		}
	}
	return out, nil
}

// The cron controls: pause and resume answer the job with its pause; run
// answers the broadcast, a repeat marked replayed; an unknown job is 404.
func TestContractCronControls(t *testing.T) {
	jobs, err := cron.Compile([]cron.Job{{Name: "daily", Schedule: "0 0 9 * * *", Timezone: "Asia/Seoul", App: "consumer",
		Audience: map[string]any{"all": true}, Message: cron.JobMessage{Title: "Good morning"}}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDomain{}
	fc := &fakeControl{fakeDomain: f, paused: map[string]bool{}}
	h := contractServer(t, f, func(d *server.Domain) {
		d.Jobs, d.Submitter = jobs, fc
		d.Reader = lastFireReader{d.Reader}
	})
	rec, out := call(t, h, http.MethodPost, "/push/cron/daily/pause", contractAdmin, "")
	if rec.Code != http.StatusOK || out["paused"] != true || out["paused_by"] != "ops" || out["message"].(map[string]any)["title"] != "Good morning" {
		t.Fatalf("pause: %d %v", rec.Code, out)
	}
	rec, out = call(t, h, http.MethodGet, "/push/cron", contractViewer, "")
	if js := out["jobs"].([]any); rec.Code != http.StatusOK || len(js) != 1 || js[0].(map[string]any)["paused"] != true {
		t.Fatalf("list: %d %v", rec.Code, out)
	}
	rec, out = call(t, h, http.MethodPost, "/push/cron/daily/resume", contractAdmin, "")
	if rec.Code != http.StatusOK || out["paused"] != false {
		t.Fatalf("resume: %d %v", rec.Code, out)
	}
	rec, _ = call(t, h, http.MethodPost, "/push/cron/daily/run", contractAdmin, "")
	if rec.Code != http.StatusOK || rec.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("run: %d %v", rec.Code, rec.Header())
	}
	rec, _ = call(t, h, http.MethodPost, "/push/cron/daily/run", contractAdmin, "")
	if rec.Code != http.StatusOK || rec.Header().Get("Idempotent-Replayed") != "true" || fc.runs != 2 {
		t.Fatalf("second run: %d %v (runs %d)", rec.Code, rec.Header(), fc.runs)
	}
	rec, out = call(t, h, http.MethodPost, "/push/cron/nope/run", contractAdmin, "")
	wantError(t, rec, out, http.StatusNotFound, "unknown_job", "")
}

// lastFireReader answers that no job ever fired.
type lastFireReader struct{ server.Reader }

func (lastFireReader) LastJobFire(context.Context, string) (model.LastFire, error) {
	return model.LastFire{}, nil
}
