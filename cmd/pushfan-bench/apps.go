package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// appsReport is `pushfan-bench apps` (issue 27, docs/apps.md): three apps
// on one `pushfan serve` at its defaults, each app's emulator enforcing a
// quota equal to the app's rate_limit, and a large bulk broadcast of
// every app submitted at once. Per app: the sustained sends/s against its
// quota; in all: the sum against the sum of the quotas, CPU per send, peak
// RSS. Then the same with every quota scaled up (APPS_LEVELS), to find
// where one instance on this machine stops keeping up: the first level at
// which an app falls under 95 % of its quota.
type appsReport struct {
	Quotas  []int        `json:"base_quotas"`
	Seconds int          `json:"seconds_at_base"`
	Window  string       `json:"quota_window"`
	Levels  []*appsLevel `json:"levels"`
	// Alone is the control: the first app on a serve of its own, at its
	// base quota, right before the levels (APPS_ALONE): what the same app
	// reaches without the other two beside it, on the machine as loaded
	// as it is then.
	Alone *appsLevel `json:"alone,omitempty"`
	// Staggered is the first app saturated at its quota, then the second
	// app's broadcast started beside it (APPS_STAGGER).
	Staggered *staggerRun `json:"staggered,omitempty"`
	// KeptUpTo is the largest total quota at which every app reached
	// 95 % of its own; FellShortAt the first one at which one did not.
	KeptUpTo    float64 `json:"kept_up_to_per_s"`
	FellShortAt float64 `json:"fell_short_at_per_s,omitempty"`
}

// appsLevel is one run: every base quota times Scale.
type appsLevel struct {
	Label string    `json:"label"`
	Scale float64   `json:"scale"`
	Apps  []*appRun `json:"apps"`
	Quota float64   `json:"total_quota_per_s"`
	// Sustained is the total accepted rate over the span in which every
	// app was between 10 % and 90 % of its audience (0 when there was
	// none); SendsPerS all the sends over submit → last finish.
	Sustained float64 `json:"total_sustained_per_s"`
	// StaggeredAtMS is when the apps after the first were submitted (a
	// staggered run), after the first's submit.
	StaggeredAtMS   int64   `json:"staggered_at_ms,omitempty"`
	SendsPerS       float64 `json:"total_sends_per_s"`
	WallSeconds     float64 `json:"wall_seconds"`
	CPUSeconds      float64 `json:"cpu_seconds"`
	CPUMicrosPerMsg float64 `json:"cpu_us_per_send"`
	PeakRSSMB       float64 `json:"peak_rss_mb"`
	LoadAvg         string  `json:"load_avg_after"`
	KeptUp          bool    `json:"kept_up"`
}

// appRun is one app's broadcast within a level.
type appRun struct {
	App         string  `json:"app"`
	Quota       float64 `json:"quota_per_s"`
	N           int     `json:"n"`
	BroadcastID uint64  `json:"broadcast_id"`
	Status      string  `json:"status"`
	Succeeded   int64   `json:"succeeded"`
	Failed      int64   `json:"failed"`
	WallSeconds float64 `json:"wall_seconds"` // submit → its finished_at
	// SustainedPerS is its emulator's accepted rate between 10 % and
	// 90 % of its audience; OfQuota that over its quota.
	SustainedPerS float64  `json:"sustained_per_s"`
	OfQuota       float64  `json:"of_quota"`
	Emu429        int64    `json:"emu_quota_429s"`
	EmuDuringBack int64    `json:"emu_requests_during_backoff"`
	Missing       int64    `json:"missing"`
	Samples       []sample `json:"accepted_samples,omitempty"`
	// What the serve's metrics said of this app over its 10–90 % span
	// (means of the scrapes in it): its share of the project's budget
	// (what the rate limiter admits), its sending goroutines and sends in
	// flight, and the seconds its workers spent waiting on the limiter per
	// second. A share at the quota with little waiting and a rate under it
	// is a machine too slow; a share under the quota, a budget that is.
	Share    float64          `json:"rate_share_per_s"`
	Workers  float64          `json:"workers"`
	InFlight float64          `json:"sends_in_flight"`
	WaitPerS float64          `json:"limiter_wait_s_per_s"`
	Gauges   []appGaugeSample `json:"metric_samples,omitempty"`
}

// appGaugeSample is one scrape of an app's series in the serve's metrics.
type appGaugeSample struct {
	AtMS     int64   `json:"at_ms"`
	Share    float64 `json:"share"`
	Workers  float64 `json:"workers"`
	InFlight float64 `json:"in_flight"`
	Wait     float64 `json:"limiter_wait_s"` // the counter's total
}

// benchApps are the apps' names, in the order of APPS_QUOTAS.
var benchApps = []string{"consumer", "partner", "whitelabel"}

func (b *bench) runApps(ctx context.Context, rep *report) error {
	o := b.o
	if len(o.appsQuotas) != len(benchApps) {
		return fmt.Errorf("APPS_QUOTAS: want %d quotas, one per app", len(benchApps))
	}
	// Each app's audience lasts APPS_SECONDS at its base quota, so that at
	// every level the three run for as long as each other.
	ns := make([]int, len(benchApps))
	total := 0
	for i, q := range o.appsQuotas {
		ns[i] = q * o.appsSeconds
		total += ns[i]
	}
	db, err := dbFor(o.dbPrefix+"_apps", total)
	if err != nil {
		return err
	}
	b.dbs[db.name] = true
	if err := ensureAppsSeeded(ctx, o.bin, db, ns, b.logf); err != nil {
		return err
	}
	ar := &appsReport{Quotas: o.appsQuotas, Seconds: o.appsSeconds, Window: o.quotaWindow.String()}
	rep.Apps = ar
	if o.appsAlone {
		lv, err := b.appsLevel(ctx, db, benchApps[:1], o.appsQuotas[:1], ns[:1], 1, "alone", 0)
		ar.Alone = lv
		if err != nil {
			return err
		}
	}
	if o.appsStagger {
		lv, err := b.appsLevel(ctx, db, benchApps[:2], o.appsQuotas[:2], ns[:2], 1, "staggered", staggerAt)
		if lv != nil {
			ar.Staggered = staggeredOf(lv)
			b.logf("  staggered: %s at %.0f/s alone (%.1f%% of %.0f), then %.0f/s (%.1f%%) beside %s at %.0f/s (%.1f%% of %.0f)",
				lv.Apps[0].App, ar.Staggered.FirstAlone, 100*ar.Staggered.FirstAlone/lv.Apps[0].Quota, lv.Apps[0].Quota,
				ar.Staggered.FirstBeside, 100*ar.Staggered.FirstBeside/lv.Apps[0].Quota, lv.Apps[1].App,
				ar.Staggered.Second, 100*ar.Staggered.Second/lv.Apps[1].Quota, lv.Apps[1].Quota)
		}
		if err != nil {
			return err
		}
	}
	for _, scale := range o.appsLevels {
		lv, err := b.appsLevel(ctx, db, benchApps, o.appsQuotas, ns, scale, fmt.Sprintf("x%g", scale), 0)
		if lv != nil {
			ar.Levels = append(ar.Levels, lv)
		}
		if err != nil {
			return err
		}
		if lv.KeptUp {
			ar.KeptUpTo = max(ar.KeptUpTo, lv.Quota)
		} else if ar.FellShortAt == 0 {
			ar.FellShortAt = lv.Quota
		}
	}
	return nil
}

// appsLevel starts an emulator per app of apps (quota = its base quota
// times scale, its rate_limit too) and one serve configured with those
// apps, submits one broadcast per app at once, each to the app's ns[i]
// tokens, and measures them until all have ended.
//
// With stagger > 0, only the first app's broadcast is submitted at first,
// and the others once its emulator has accepted that fraction of its
// audience.
func (b *bench) appsLevel(ctx context.Context, db benchDB, apps []string, quotas, ns []int, scale float64, label string, stagger float64) (*appsLevel, error) {
	o := b.o
	lv := &appsLevel{Scale: scale, Label: label}
	emus := make([]*emulator, len(apps))
	var yaml strings.Builder
	yaml.WriteString("apps:\n")
	var cas []byte
	for i, app := range apps {
		rate := float64(quotas[i]) * scale
		quota := int(rate * o.quotaWindow.Seconds())
		emu, err := startEmulator(ctx, o.bin, b.dir, emulatorSpec{name: fmt.Sprintf("emulator-%s-%s", app, label),
			latency: o.latency, jitter: o.jitter, mode: o.mode, quota: quota, quotaWindow: o.quotaWindow})
		if err != nil {
			return nil, err
		}
		b.procs = append(b.procs, emu.p)
		defer emu.p.stop(10 * time.Second)
		emus[i] = emu
		fmt.Fprintf(&yaml, "  - name: %s\n    project_id: bench-%s\n    endpoint: %s\n    rate_limit: %g\n", app, app, emu.endpoint, rate)
		if emu.caFile != "" {
			pem, err := os.ReadFile(emu.caFile)
			if err != nil {
				return nil, err
			}
			cas = append(cas, pem...)
		}
		lv.Apps = append(lv.Apps, &appRun{App: app, Quota: rate, N: ns[i]})
		lv.Quota += rate
	}
	cfgPath := filepath.Join(b.dir, "apps-"+label+".yaml")
	if err := os.WriteFile(cfgPath, []byte(yaml.String()), 0o600); err != nil {
		return nil, err
	}
	env := []string{"PUSHFAN_CONFIG=" + cfgPath}
	if o.quotaWindow != time.Minute {
		env = append(env, "PUSHFAN_RATE_WINDOW="+o.quotaWindow.String())
	}
	if len(cas) > 0 { // one bundle of the three emulators' CAs
		bundle := filepath.Join(b.dir, "emulators-ca.pem")
		if err := os.WriteFile(bundle, cas, 0o600); err != nil {
			return nil, err
		}
		env = append(env, "PUSHFAN_FCM_CA_FILE="+bundle)
	}
	svc, err := startService(ctx, o.bin, b.dir, "serve-apps-"+label, emus[0],
		serviceSpec{db: db, extraEnv: append(env, o.serveEnv...)})
	if err != nil {
		return nil, err
	}
	b.procs = append(b.procs, svc.p)
	defer svc.stop()
	b.logf("apps %s: quotas %s/s (total %.0f/s), audiences %v", label, fmtQuotas(lv.Apps), lv.Quota, ns)

	st0 := make([]emuStats, len(emus))
	for i, e := range emus {
		if st0[i], err = e.stats(ctx); err != nil {
			return nil, err
		}
	}
	cpu0, err := procCPU(svc.p.pid())
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	views := make([]broadcastView, len(apps))
	submitted := 0
	submit := func(upTo int) error {
		for ; submitted < upTo; submitted++ {
			var body map[string]any
			if err := json.Unmarshal(untrackedBody, &body); err != nil {
				return err
			}
			body["app"] = apps[submitted]
			raw, _ := json.Marshal(body)
			v, err := svc.call(ctx, http.MethodPost, "/push/broadcast?wait=0", raw)
			if err != nil {
				return err
			}
			views[submitted] = v
			lv.Apps[submitted].BroadcastID = v.ID
		}
		return nil
	}
	first := len(apps)
	if stagger > 0 {
		first = 1
	}
	if err := submit(first); err != nil {
		return nil, err
	}
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	nextSample, nextScrape, lastLog := t0, t0, t0
	deadline := t0.Add(time.Duration(float64(o.appsSeconds)/scale*float64(time.Second))*4 + 2*time.Minute)
	for {
		done := submitted == len(apps)
		for i := range views[:submitted] {
			if views[i].Final() {
				continue
			}
			done = false
			if views[i], err = svc.call(ctx, http.MethodGet, fmt.Sprintf("/push/broadcasts/%d", views[i].ID), nil); err != nil {
				return nil, err
			}
		}
		if now := time.Now(); !now.Before(nextSample) {
			for i, e := range emus {
				if s, err := e.stats(ctx); err == nil {
					lv.Apps[i].Samples = append(lv.Apps[i].Samples, sample{AtMS: now.Sub(t0).Milliseconds(), Accepted: s.Accepted - st0[i].Accepted})
				}
			}
			nextSample = nextSample.Add(500 * time.Millisecond)
			if first := lv.Apps[0].Samples; submitted < len(apps) && len(first) > 0 && first[len(first)-1].Accepted >= int64(stagger*float64(ns[0])) {
				lv.StaggeredAtMS = now.Sub(t0).Milliseconds()
				if err := submit(len(apps)); err != nil {
					return nil, err
				}
			}
			if !now.Before(nextScrape) {
				if g, err := scrapeAppGauges(ctx, svc); err == nil {
					for i, app := range apps {
						x := g[app]
						x.AtMS = now.Sub(t0).Milliseconds()
						lv.Apps[i].Gauges = append(lv.Apps[i].Gauges, x)
					}
				}
				nextScrape = nextScrape.Add(2 * time.Second)
			}
			if now.Sub(lastLog) >= 10*time.Second {
				var parts []string
				for i, v := range views {
					parts = append(parts, fmt.Sprintf("%s %d/%d", apps[i], v.Succeeded+v.Failed, ns[i]))
				}
				b.logf("  … %s after %.0fs: %s", label, now.Sub(t0).Seconds(), strings.Join(parts, ", "))
				lastLog = now
			}
		}
		if done {
			break
		}
		switch {
		case svc.p.exited():
			return nil, fmt.Errorf("pushfan serve exited during the apps run: %v\n%s", svc.p.exitErr, svc.p.tail(30))
		case time.Now().After(deadline):
			return nil, fmt.Errorf("apps %s: the broadcasts had not ended after %v (%+v)\n%s", label, time.Since(t0).Round(time.Second), views, svc.p.tail(30))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-poll.C:
		}
	}
	cpu1, err := procCPU(svc.p.pid())
	if err != nil {
		return nil, err
	}
	hwm, err := procStatusKB(svc.p.pid(), "VmHWM")
	if err != nil {
		return nil, err
	}
	lv.LoadAvg = loadAvg()
	var sent int64
	var last time.Time
	var errs []error
	for i, r := range lv.Apps {
		v := views[i]
		st1, err := emus[i].stats(ctx)
		if err != nil {
			return nil, err
		}
		r.Status, r.Succeeded, r.Failed = v.Status, v.Succeeded, v.Failed
		end := time.Now()
		if v.FinishedAt != nil {
			end = *v.FinishedAt
		}
		last = maxTime(last, end)
		r.WallSeconds = end.Sub(t0).Seconds()
		r.SustainedPerS = sustained(r.Samples, r.N)
		if r.SustainedPerS == 0 && r.WallSeconds > 0 {
			r.SustainedPerS = float64(r.Succeeded) / r.WallSeconds
		}
		r.OfQuota = r.SustainedPerS / r.Quota
		r.spanGauges()
		r.Emu429 = st1.ByCode["RATE_LIMIT_EXCEEDED"] - st0[i].ByCode["RATE_LIMIT_EXCEEDED"]
		r.EmuDuringBack = st1.RequestsDuringBack - st0[i].RequestsDuringBack
		r.Missing = int64(r.N) - (st1.Accepted - st0[i].Accepted)
		sent += r.Succeeded + r.Failed
		if v.Status != "completed" || r.Succeeded != int64(r.N) {
			errs = append(errs, fmt.Errorf("app %s: broadcast %d ended %s with %d of %d succeeded", r.App, v.ID, v.Status, r.Succeeded, r.N))
		}
	}
	lv.WallSeconds = last.Sub(t0).Seconds()
	if lv.WallSeconds > 0 {
		lv.SendsPerS = float64(sent) / lv.WallSeconds
	}
	lv.Sustained = jointSustained(lv.Apps)
	lv.CPUSeconds = (cpu1 - cpu0).Seconds()
	if sent > 0 {
		lv.CPUMicrosPerMsg = lv.CPUSeconds * 1e6 / float64(sent)
	}
	lv.PeakRSSMB = float64(hwm) / 1024
	lv.KeptUp = len(errs) == 0
	for _, r := range lv.Apps {
		lv.KeptUp = lv.KeptUp && r.OfQuota >= 0.95
		b.logf("  %s: %.0f/s sustained of %.0f/s (%.1f%%), %d succeeded, %d quota 429s; share %.0f/s, %.0f workers, %.0f in flight, limiter wait %.1f s/s",
			r.App, r.SustainedPerS, r.Quota, 100*r.OfQuota, r.Succeeded, r.Emu429, r.Share, r.Workers, r.InFlight, r.WaitPerS)
	}
	b.logf("  %s: %.0f/s sustained together of %.0f/s, %.1f µs CPU/send, peak RSS %.1f MB, load %s", label, lv.Sustained, lv.Quota, lv.CPUMicrosPerMsg, lv.PeakRSSMB, lv.LoadAvg)
	return lv, errors.Join(errs...)
}
