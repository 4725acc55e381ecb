package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// segmentFigures are what a three-condition segment costs on the scale
// run's tokens (issue 42): the tokens get random platforms and app
// versions and the users a plan attribute, then one serve (the plan
// attribute declared) previews the segment (the estimate, then the exact
// count) and plans it against a plain "all", each at max_rate 1 so that
// no send competes with the plan, then canceled.
type segmentFigures struct {
	Filter       json.RawMessage       `json:"filter"`
	SeedSeconds  float64               `json:"seed_seconds"`
	EstimateMS   float64               `json:"preview_estimate_ms"`
	Estimate     int64                 `json:"preview_estimate_tokens"`
	ExactMS      float64               `json:"preview_exact_ms"`
	Exact        int64                 `json:"preview_exact_tokens"`
	ExactUsers   int64                 `json:"preview_exact_users"`
	PreviewError string                `json:"preview_error,omitempty"`
	Runs         map[string]consentRun `json:"by_audience"`
	// Ratio is the segment plan's tokens read a second over the plain
	// one's.
	Ratio float64 `json:"plan_throughput_ratio"`
}

// scaleSegmentFilter is the measured segment: platform, app version and
// plan, one of each kind of field.
const scaleSegmentFilter = `{"and":[{"field":"platform","op":"eq","value":"android"},` +
	`{"field":"app_version","op":"gte","value":"5.10"},{"field":"attributes.plan","op":"in","value":["pro","family"]}]}`

// segmentYAML declares the users' plan_code column as the attribute plan.
const segmentYAML = `schema:
  users:
    attributes:
      plan: {column: plan_code, type: string}
`

// segmentCost seeds the columns, saves the segment and measures.
func (m *scaleMeasure) segmentCost(ctx context.Context) error {
	m.setPhase("segment")
	defer m.setPhase("")
	f := &segmentFigures{Filter: json.RawMessage(scaleSegmentFilter), Runs: map[string]consentRun{}}
	m.sr.Segment = f
	t0 := time.Now()
	for _, q := range []string{
		"ALTER TABLE users ADD COLUMN IF NOT EXISTS plan_code VARCHAR(16) NULL",
		"UPDATE users SET plan_code = ELT(1 + id % 4, 'free', 'pro', 'family', NULL)",
		"UPDATE device_tokens SET platform = ELT(1 + id % 3, 'android', 'ios', 'web'), app_version = ELT(1 + id % 5, '5.9.2', '5.10.0', '6.0.1', '4.2', NULL)",
		"DELETE v FROM segment_versions v JOIN segments s ON s.id = v.segment_id WHERE s.name = 'bench-three'",
		"DELETE FROM segments WHERE name = 'bench-three'",
		"INSERT INTO segments (name, version, created_at, updated_at) VALUES ('bench-three', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
	} {
		if _, err := m.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("seeding the segment's columns: %w", err)
		}
	}
	if _, err := m.db.ExecContext(ctx, "INSERT INTO segment_versions (segment_id, version, filter, created_at) SELECT id, 1, ?, UTC_TIMESTAMP(6) FROM segments WHERE live_name = 'bench-three'", scaleSegmentFilter); err != nil {
		return fmt.Errorf("saving the segment: %w", err)
	}
	f.SeedSeconds = time.Since(t0).Seconds()
	m.b.logf("  segment: platforms, app versions and plans written in %.1f s", f.SeedSeconds)
	cfg := filepath.Join(m.b.dir, "segment.yaml")
	if err := os.WriteFile(cfg, []byte(segmentYAML), 0o600); err != nil {
		return err
	}
	svc, err := m.b.scaleService(ctx, m.emu, benchDB{dsn: m.svc.dsn()}, "serve-segment", "PUSHFAN_CONFIG="+cfg)
	if err != nil {
		return err
	}
	defer svc.stop()
	sm := &scaleMeasure{b: m.b, svc: svc, emu: m.emu, db: m.db, sr: m.sr}
	sm.segmentPreview(ctx, f)
	for name, audience := range map[string]map[string]any{"all": {"all": true}, "segment": {"segment": "bench-three"}} {
		run, err := sm.planPaced(ctx, name, audience)
		if err != nil {
			return fmt.Errorf("segment plan of %s: %w", name, err)
		}
		f.Runs[name] = run
		m.b.logf("  segment: plan of %s %.1f s, %d targeted: %.0f tokens read/s", name, run.PlanSeconds, run.Targeted, run.TokensPerS)
	}
	if plain := f.Runs["all"].TokensPerS; plain > 0 {
		f.Ratio = f.Runs["segment"].TokensPerS / plain
	}
	return nil
}

// segmentPreview times POST /push/segments/preview: the estimate, then
// the exact count.
func (m *scaleMeasure) segmentPreview(ctx context.Context, f *segmentFigures) {
	var p struct {
		Tokens int64 `json:"tokens"`
		Users  int64 `json:"users"`
		Exact  bool  `json:"exact"`
	}
	t0 := time.Now()
	if err := m.svc.postJSONWithin(ctx, 2*time.Minute, "/push/segments/preview", map[string]any{"filter": f.Filter}, &p); err != nil {
		f.PreviewError = err.Error()
		m.b.logf("  segment: preview: %v", err)
		return
	}
	f.EstimateMS, f.Estimate = ms(time.Since(t0)), p.Tokens
	t0 = time.Now()
	if err := m.svc.postJSONWithin(ctx, 2*time.Minute, "/push/segments/preview", map[string]any{"filter": f.Filter, "exact": true}, &p); err != nil {
		f.PreviewError = err.Error()
		m.b.logf("  segment: exact preview: %v", err)
		return
	}
	f.ExactMS, f.Exact, f.ExactUsers = ms(time.Since(t0)), p.Tokens, p.Users
	m.b.logf("  segment: preview estimate %d tokens in %.0f ms; exact %d tokens (%d users) in %.0f ms", f.Estimate, f.EstimateMS, f.Exact, f.ExactUsers, f.ExactMS)
}

// planPaced plans a broadcast to audience at max_rate 1 (a paced plan
// never rests beside its sends) and cancels it; tokens read/s is the
// tokens table's span over the plan's time.
func (m *scaleMeasure) planPaced(ctx context.Context, name string, audience map[string]any) (consentRun, error) {
	var r consentRun
	t0 := time.Now()
	v, _, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "segment " + name, "audience": audience, "max_rate": 1})
	if err != nil {
		return r, err
	}
	pv, planned, err := m.waitPlanned(ctx, v.ID, t0)
	if err != nil {
		return r, err
	}
	r.PlanSeconds, r.Targeted = planned, pv.Targeted
	var span int64
	if err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM device_tokens").Scan(&span); err != nil {
		return r, err
	}
	if planned > 0 {
		r.TokensPerS = float64(span) / planned
	}
	if !pv.Final() {
		if _, err := m.cancel(ctx, v.ID); err != nil {
			return r, err
		}
	}
	return r, nil
}
