package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
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

// spanGauges sets Share, Workers, InFlight and WaitPerS from the scrapes
// taken while r was between 10 % and 90 % of its audience (all of them
// when none was).
func (r *appRun) spanGauges() {
	var from, to int64 = 0, 1 << 62
	for _, s := range r.Samples {
		if s.Accepted < int64(r.N)/10 {
			from = s.AtMS
		}
		if s.Accepted >= int64(r.N)*9/10 && s.AtMS < to {
			to = s.AtMS
		}
	}
	var in []appGaugeSample
	for _, g := range r.Gauges {
		if g.AtMS >= from && g.AtMS <= to {
			in = append(in, g)
		}
	}
	if len(in) == 0 {
		in = r.Gauges
	}
	if len(in) == 0 {
		return
	}
	for _, g := range in {
		r.Share += g.Share / float64(len(in))
		r.Workers += g.Workers / float64(len(in))
		r.InFlight += g.InFlight / float64(len(in))
	}
	if first, last := in[0], in[len(in)-1]; last.AtMS > first.AtMS {
		r.WaitPerS = (last.Wait - first.Wait) * 1000 / float64(last.AtMS-first.AtMS)
	}
}

// scrapeAppGauges reads each app's share, workers, sends in flight and
// limiter wait from the serve's GET /metrics.
func scrapeAppGauges(ctx context.Context, svc *service) (map[string]appGaugeSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, svc.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := svc.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]appGaugeSample{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		app, ok := labelValue(labels, "app")
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscanf(value, "%g", &v); err != nil {
			continue
		}
		g := out[app]
		switch name {
		case "pushfan_rate_share":
			g.Share = v
		case "pushfan_fcm_workers":
			g.Workers = v
		case "pushfan_fcm_sends_in_flight":
			g.InFlight = v
		case "pushfan_rate_limiter_wait_seconds_total":
			g.Wait = v
		default:
			continue
		}
		out[app] = g
	}
	return out, nil
}

// staggerAt is the part of the first app's audience sent before the
// second app's broadcast starts, in a staggered run.
const staggerAt = 0.3

// staggerRun is a staggered run's figures: the first app's rate before
// the second started (from 10 % of its audience to the start), and each
// app's rate while both ran (from the second's 10 % to the first sample
// at which either had 90 %).
type staggerRun struct {
	Run         *appsLevel `json:"run"`
	FirstAlone  float64    `json:"first_alone_per_s"`
	FirstBeside float64    `json:"first_beside_per_s"`
	Second      float64    `json:"second_beside_per_s"`
}

func staggeredOf(lv *appsLevel) *staggerRun {
	st := &staggerRun{Run: lv}
	if len(lv.Apps) < 2 {
		return st
	}
	a, b := lv.Apps[0], lv.Apps[1]
	rate := func(s []sample, from, to int64) float64 {
		var x, y *sample
		for i := range s {
			if x == nil && s[i].AtMS >= from {
				x = &s[i]
			}
			if s[i].AtMS <= to {
				y = &s[i]
			}
		}
		if x == nil || y == nil || y.AtMS <= x.AtMS {
			return 0
		}
		return float64(y.Accepted-x.Accepted) * 1000 / float64(y.AtMS-x.AtMS)
	}
	at := func(s []sample, n int64) int64 {
		for _, x := range s {
			if x.Accepted >= n {
				return x.AtMS
			}
		}
		return 1 << 62
	}
	st.FirstAlone = rate(a.Samples, at(a.Samples, int64(a.N)/10), lv.StaggeredAtMS)
	from := at(b.Samples, int64(b.N)/10)
	to := min(at(a.Samples, int64(a.N)*9/10), at(b.Samples, int64(b.N)*9/10))
	st.FirstBeside, st.Second = rate(a.Samples, from, to), rate(b.Samples, from, to)
	return st
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// jointSustained is the apps' total accepted rate over the span in which
// every one of them was between 10 % and 90 % of its audience (their
// samples are taken together), or 0 when there was no such span.
func jointSustained(apps []*appRun) float64 {
	if len(apps) == 0 {
		return 0
	}
	n := len(apps[0].Samples)
	for _, r := range apps {
		n = min(n, len(r.Samples))
	}
	lo, hi := -1, -1
	for k := range n {
		all10, any90 := true, false
		for _, r := range apps {
			all10 = all10 && r.Samples[k].Accepted >= int64(r.N)/10
			any90 = any90 || r.Samples[k].Accepted >= int64(r.N)*9/10
		}
		if lo < 0 && all10 {
			lo = k
		}
		if any90 {
			hi = k
			break
		}
	}
	if lo < 0 || hi <= lo {
		return 0
	}
	var sent int64
	for _, r := range apps {
		sent += r.Samples[hi].Accepted - r.Samples[lo].Accepted
	}
	ms := apps[0].Samples[hi].AtMS - apps[0].Samples[lo].AtMS
	if ms <= 0 {
		return 0
	}
	return float64(sent) * 1000 / float64(ms)
}

func fmtQuotas(apps []*appRun) string {
	parts := make([]string, len(apps))
	for i, r := range apps {
		parts[i] = fmt.Sprintf("%.0f", r.Quota)
	}
	return strings.Join(parts, "+")
}

// ensureAppsSeeded makes sure db holds exactly the tokens of the bench's
// apps, ns[i] valid tokens of benchApps[i] each of its own push-enabled
// user: it seeds them with `pushfan seed` when the database does not hold
// one token for each of sum(ns) users, migrates it (a database seeded by
// a release before apps), and gives the tokens their apps. Earlier runs'
// broadcasts are cleared (ensureSeeded).
func ensureAppsSeeded(ctx context.Context, bin string, db benchDB, ns []int, logf func(string, ...any)) error {
	if err := ensureSeeded(ctx, bin, db, logf); err != nil {
		return err
	}
	if ok, _ := appsSeeded(ctx, db, ns); ok {
		return nil
	}
	cmd := exec.CommandContext(ctx, bin, "migrate")
	cmd.Env = append(os.Environ(), "PUSHFAN_MYSQL_DSN="+db.dsn, "PUSHFAN_LOG_LEVEL=warn",
		"PUSHFAN_FCM_ENDPOINT=http://127.0.0.1:9/v1", "PUSHFAN_FCM_PROJECT_ID="+benchProject)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pushfan migrate: %w\n%s", err, out)
	}
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	logf("giving %s's tokens the apps %v: %v", db.name, benchApps, ns)
	lo := 0
	for i, app := range benchApps {
		if _, err := conn.ExecContext(ctx, "UPDATE device_tokens SET app = ? WHERE user_id > ? AND user_id <= ?", app, lo, lo+ns[i]); err != nil {
			return fmt.Errorf("giving tokens the app %s: %w", app, err)
		}
		lo += ns[i]
	}
	if ok, why := appsSeeded(ctx, db, ns); !ok {
		return fmt.Errorf("%s after giving the tokens their apps: %s", db.name, why)
	}
	return nil
}

func appsSeeded(ctx context.Context, db benchDB, ns []int) (bool, string) {
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return false, err.Error()
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, "SELECT app, COUNT(*) FROM device_tokens WHERE invalidated_at IS NULL GROUP BY app")
	if err != nil {
		return false, "not there yet"
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var app string
		var n int
		if err := rows.Scan(&app, &n); err != nil {
			return false, err.Error()
		}
		got[app] = n
	}
	if err := rows.Err(); err != nil {
		return false, err.Error()
	}
	want := map[string]int{}
	for i, app := range benchApps {
		want[app] = ns[i]
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return false, fmt.Sprintf("holds valid tokens by app %v", got)
	}
	return true, ""
}

func (ar *appsReport) print(w io.Writer) {
	fmt.Fprintf(w, "\napps on one serve at its defaults, each app's emulator enforcing its rate_limit as its quota (per %s), one bulk broadcast per app (at once, but for the staggered run):\n", ar.Window)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "level\tapp\tquota/s\tN\tsustained/s\tof quota\twall s\t429s\tmissing\tshare/s\tworkers\tin flight\tlimiter wait s/s\t")
	levels := ar.Levels
	if ar.Staggered != nil {
		levels = append([]*appsLevel{ar.Staggered.Run}, levels...)
	}
	if ar.Alone != nil {
		levels = append([]*appsLevel{ar.Alone}, levels...)
	}
	for _, lv := range levels {
		for _, r := range lv.Apps {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%d\t%.0f\t%.1f%%\t%.1f\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.1f\t\n", lv.Label, r.App, r.Quota, r.N, r.SustainedPerS, 100*r.OfQuota,
				r.WallSeconds, r.Emu429, r.Missing, r.Share, r.Workers, r.InFlight, r.WaitPerS)
		}
		if len(lv.Apps) < 2 {
			continue
		}
		fmt.Fprintf(tw, "%s\tall\t%.0f\t\t%.0f\t%.1f%%\t%.1f\t\t\t\t\t\t\t\n", lv.Label, lv.Quota, lv.Sustained, 100*lv.Sustained/lv.Quota, lv.WallSeconds)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "level\ttotal quota/s\tsustained/s\tsends/s (wall)\tCPU µs/send\tpeak RSS MB\tload after\tevery app ≥ 95%\t")
	for _, lv := range levels {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%s\t%s\t\n", lv.Label, lv.Quota, lv.Sustained, lv.SendsPerS, lv.CPUMicrosPerMsg, lv.PeakRSSMB, lv.LoadAvg, yesNo(lv.KeptUp))
	}
	tw.Flush()
	if st := ar.Staggered; st != nil && len(st.Run.Apps) == 2 {
		a, b := st.Run.Apps[0], st.Run.Apps[1]
		fmt.Fprintf(w, "staggered: %s alone %.0f/s (%.1f%% of its %.0f/s); once %s started at %.0f%% of it: %s %.0f/s (%.1f%%), %s %.0f/s (%.1f%% of its %.0f/s)\n",
			a.App, st.FirstAlone, 100*st.FirstAlone/a.Quota, a.Quota, b.App, 100*staggerAt, a.App, st.FirstBeside, 100*st.FirstBeside/a.Quota,
			b.App, st.Second, 100*st.Second/b.Quota, b.Quota)
	}
	switch {
	case len(ar.Levels) == 0:
	case ar.FellShortAt > 0 && ar.KeptUpTo > 0:
		fmt.Fprintf(w, "one instance kept every app at ≥ 95%% of its quota up to %.0f/s in all; at %.0f/s it did not\n", ar.KeptUpTo, ar.FellShortAt)
	case ar.FellShortAt > 0:
		fmt.Fprintf(w, "one instance did not keep every app at ≥ 95%% of its quota even at %.0f/s in all\n", ar.FellShortAt)
	default:
		fmt.Fprintf(w, "one instance kept every app at ≥ 95%% of its quota at every level, up to %.0f/s in all\n", ar.KeptUpTo)
	}
}
