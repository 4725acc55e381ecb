package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// consentFigures are what a category's consent costs a plan on the scale
// run's tokens (issue 41): half the users consented to advertising in the
// bundled consent table, a quarter at night too, and the category has
// Korea's night window (21:00–08:00 in each user's zone, so about half of
// the 16 zones are inside it whenever the run is made). A plain "all"
// (the service category: no consent) and an advertising "all" are each
// planned by their own serve's planner at max_rate 1, so that no send
// competes with the plan (a paced broadcast's plan never rests), then
// canceled.
type consentFigures struct {
	Granted     int64                 `json:"users_granted"`
	NightToo    int64                 `json:"users_granted_at_night"`
	SeedSeconds float64               `json:"seed_seconds"`
	Runs        map[string]consentRun `json:"by_category"`
	// Ratio is the advertising plan's tokens read a second over the plain
	// one's (target ≥ 0.8).
	Ratio float64 `json:"plan_throughput_ratio"`
}

// consentRun is one category's plan.
type consentRun struct {
	PlanSeconds   float64 `json:"plan_s"`
	Targeted      int64   `json:"targeted"`
	Excluded      int64   `json:"excluded_no_consent"`
	NightDeferred int64   `json:"night_deferred"`
	// TokensPerS is the audience the plan read (targeted + excluded) over
	// its time.
	TokensPerS float64 `json:"tokens_read_per_s"`
}

// consentYAML is the serve's categories (docs/consent.md's example).
const consentYAML = `categories:
  - name: advertising
    consent: table
    night:
      window: "21:00-08:00"
      consent: table
    title_prefix: "(광고) "
    body_suffix: "\n수신거부: 앱 설정 > 알림"
  - name: service
default_category: service
`

// consentCost seeds the consents, starts a serve with the categories and
// plans both broadcasts, the plain one first.
func (m *scaleMeasure) consentCost(ctx context.Context) error {
	m.setPhase("consent")
	defer m.setPhase("")
	f := &consentFigures{Runs: map[string]consentRun{}}
	m.sr.Consent = f
	t0 := time.Now()
	if _, err := m.db.ExecContext(ctx, "DELETE FROM user_consents WHERE category = 'advertising'"); err != nil {
		return fmt.Errorf("clearing consents: %w", err)
	}
	res, err := m.db.ExecContext(ctx, `INSERT INTO user_consents (user_id, category, granted, night, updated_at, changed_at, source)
		SELECT id, 'advertising', 1, id % 4 = 0, NOW(6), NOW(6), 'bench' FROM users WHERE id % 2 = 0`)
	if err != nil {
		return fmt.Errorf("seeding consents: %w", err)
	}
	f.Granted, _ = res.RowsAffected()
	f.NightToo = f.Granted / 2
	f.SeedSeconds = time.Since(t0).Seconds()
	m.b.logf("  consent: %d users granted advertising (half of them at night too) in %.1f s", f.Granted, f.SeedSeconds)
	cfg := filepath.Join(m.b.dir, "consent.yaml")
	if err := os.WriteFile(cfg, []byte(consentYAML), 0o600); err != nil {
		return err
	}
	svc, err := m.b.scaleService(ctx, m.emu, benchDB{dsn: m.svc.dsn()}, "serve-consent", "PUSHFAN_CONFIG="+cfg)
	if err != nil {
		return err
	}
	defer svc.stop()
	sm := &scaleMeasure{b: m.b, svc: svc, emu: m.emu, db: m.db, sr: m.sr}
	for _, category := range []string{"service", "advertising"} {
		run, err := sm.consentPlan(ctx, category)
		if err != nil {
			return fmt.Errorf("consent %s: %w", category, err)
		}
		f.Runs[category] = run
		m.b.logf("  consent %s: plan of all %.1f s, %d targeted, %d left out without consent, %d deferred by the night window: %.0f tokens read/s",
			category, run.PlanSeconds, run.Targeted, run.Excluded, run.NightDeferred, run.TokensPerS)
	}
	if plain := f.Runs["service"].TokensPerS; plain > 0 {
		f.Ratio = f.Runs["advertising"].TokensPerS / plain
	}
	return nil
}

// consentPlan plans an "all" of category at max_rate 1 and cancels it.
func (m *scaleMeasure) consentPlan(ctx context.Context, category string) (consentRun, error) {
	var r consentRun
	t0 := time.Now()
	v, _, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "consent " + category, "category": category,
		"audience": map[string]any{"all": true}, "max_rate": 1})
	if err != nil {
		return r, err
	}
	pv, planned, err := m.waitPlanned(ctx, v.ID, t0)
	if err != nil {
		return r, err
	}
	r.PlanSeconds, r.Targeted, r.Excluded, r.NightDeferred = planned, pv.Targeted, pv.ExcludedNoConsent, pv.NightDeferred
	if planned > 0 {
		r.TokensPerS = float64(r.Targeted+r.Excluded) / planned
	}
	if !pv.Final() {
		if _, err := m.cancel(ctx, v.ID); err != nil {
			return r, err
		}
	}
	return r, nil
}
