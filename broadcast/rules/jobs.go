package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"pushfan/cron"
	"pushfan/model"
)

// JobRequest turns one fire of a job into a validated request, by the same
// rules as an API request. The idempotency key "cron:<job>:<fire time>" is
// what makes each fire one broadcast however many instances (or external
// triggers) fire it.
func (r Rules) JobRequest(j *cron.Compiled, fire time.Time) (Request, error) {
	aud, err := jobAudience(j.Audience)
	if err != nil {
		return Request{}, fmt.Errorf("job %s: %w", j.Name, err)
	}
	spec := Spec{Title: j.Message.Title, Body: j.Message.Body, Image: j.Message.Image, Data: j.Message.Data, Audience: aud, Class: j.Class, job: j.Name, App: j.App, Category: j.Category,
		AnalyticsLabel: j.AnalyticsLabel}
	for tag, l := range j.Message.Localized {
		if spec.Localized == nil {
			spec.Localized = make(map[string]model.Localized, len(j.Message.Localized))
		}
		spec.Localized[tag] = model.Localized{Title: l.Title, Body: l.Body}
	}
	if err := jobPlatform(&spec, j.Message); err != nil {
		return Request{}, fmt.Errorf("job %s: %w", j.Name, err)
	}
	if j.MaxRate != 0 {
		spec.MaxRate = &j.MaxRate
	}
	if j.DeliverOver != 0 {
		spec.DeliverOver = j.DeliverOver.String()
	}
	if err := jobLocal(&spec, j, fire); err != nil {
		return Request{}, fmt.Errorf("job %s: %w", j.Name, err)
	}
	in, err := r.Validate(spec, time.Time{})
	if err != nil {
		return in, fmt.Errorf("job %s: %w", j.Name, err)
	}
	ft := fire.UTC()
	in.Trigger, in.JobName, in.FireTime, in.CreatedBy = "cron", j.Name, &ft, "cron"
	in.IdempotencyKey = "cron:" + j.Name + ":" + ft.Format(time.RFC3339Nano)
	return in, nil
}

// jobAudience reads a job's audience (YAML decoded into a map) strictly,
// as the API reads a request's.
func jobAudience(raw map[string]any) (*AudienceSpec, error) {
	if raw == nil {
		return nil, nil
	}
	buf, err := json.Marshal(raw)
	if err != nil {
		return nil, fieldError("invalid_value", "audience", "the audience is not an object of plain values: %v", err)
	}
	var a AudienceSpec
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fieldError("invalid_value", "audience", "%v", err)
	}
	return &a, nil
}

// jobPlatform passes a job's platform overrides (YAML decoded into maps)
// on as the JSON an API request would carry.
func jobPlatform(spec *Spec, m cron.JobMessage) error {
	for _, o := range []struct {
		name string
		v    map[string]any
		dst  *json.RawMessage
	}{{"android", m.Android, &spec.Android}, {"apns", m.APNS, &spec.APNS}, {"webpush", m.Webpush, &spec.Webpush}, {"fcm_options", m.FCMOptions, &spec.FCMOptions}} {
		if o.v == nil {
			continue
		}
		raw, err := json.Marshal(o.v)
		if err != nil {
			return fieldError("invalid_value", o.name, "%s is not an object of plain values (are all its keys strings?): %v", o.name, err)
		}
		*o.dst = raw
	}
	return nil
}

// CheckJobs validates every job's message and audience as a request would
// be, so a bad job stops start-up instead of failing at its first fire.
func (r Rules) CheckJobs(jobs []*cron.Compiled) error {
	var errs []error
	for _, j := range jobs {
		if _, err := r.JobRequest(j, time.Now()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
