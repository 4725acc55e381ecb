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
	// KeptUpTo is the largest total quota at which every app reached
	// 95 % of its own; FellShortAt the first one at which one did not.
	KeptUpTo    float64 `json:"kept_up_to_per_s"`
	FellShortAt float64 `json:"fell_short_at_per_s,omitempty"`
}

// appsLevel is one run: every base quota times Scale.
type appsLevel struct {
	Scale float64   `json:"scale"`
	Apps  []*appRun `json:"apps"`
	Quota float64   `json:"total_quota_per_s"`
	// Sustained is the total accepted rate over the span in which every
	// app was between 10 % and 90 % of its audience (0 when there was
	// none); SendsPerS all the sends over submit → last finish.
	Sustained       float64 `json:"total_sustained_per_s"`
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
	for _, scale := range o.appsLevels {
		lv, err := b.appsLevel(ctx, db, ns, scale)
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

// appsLevel starts an emulator per app (quota = its rate_limit, scaled)
// and one serve configured with the three apps, submits one broadcast per
// app at once, and measures them until all have ended.
func (b *bench) appsLevel(ctx context.Context, db benchDB, ns []int, scale float64) (*appsLevel, error) {
	o := b.o
	lv := &appsLevel{Scale: scale}
	emus := make([]*emulator, len(benchApps))
	var yaml strings.Builder
	yaml.WriteString("apps:\n")
	var cas []byte
	for i, app := range benchApps {
		rate := float64(o.appsQuotas[i]) * scale
		quota := int(rate * o.quotaWindow.Seconds())
		emu, err := startEmulator(ctx, o.bin, b.dir, emulatorSpec{name: fmt.Sprintf("emulator-%s-x%g", app, scale),
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
	cfgPath := filepath.Join(b.dir, fmt.Sprintf("apps-x%g.yaml", scale))
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
	svc, err := startService(ctx, o.bin, b.dir, fmt.Sprintf("serve-apps-x%g", scale), emus[0],
		serviceSpec{db: db, extraEnv: append(env, o.serveEnv...)})
	if err != nil {
		return nil, err
	}
	b.procs = append(b.procs, svc.p)
	defer svc.stop()
	b.logf("apps at x%g: quotas %s/s (total %.0f/s), audiences %v", scale, fmtQuotas(lv.Apps), lv.Quota, ns)

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
	views := make([]broadcastView, len(benchApps))
	for i, app := range benchApps {
		var body map[string]any
		if err := json.Unmarshal(untrackedBody, &body); err != nil {
			return nil, err
		}
		body["app"] = app
		raw, _ := json.Marshal(body)
		if views[i], err = svc.call(ctx, http.MethodPost, "/push/broadcast?wait=0", raw); err != nil {
			return nil, err
		}
		lv.Apps[i].BroadcastID = views[i].ID
	}
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	nextSample, lastLog := t0, t0
	deadline := t0.Add(time.Duration(float64(o.appsSeconds)/scale*float64(time.Second))*4 + 2*time.Minute)
	for {
		done := true
		for i := range views {
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
			if now.Sub(lastLog) >= 10*time.Second {
				var parts []string
				for i, v := range views {
					parts = append(parts, fmt.Sprintf("%s %d/%d", benchApps[i], v.Succeeded+v.Failed, ns[i]))
				}
				b.logf("  … x%g after %.0fs: %s", scale, now.Sub(t0).Seconds(), strings.Join(parts, ", "))
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
			return nil, fmt.Errorf("apps at x%g: the broadcasts had not ended after %v (%+v)\n%s", scale, time.Since(t0).Round(time.Second), views, svc.p.tail(30))
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
		b.logf("  %s: %.0f/s sustained of %.0f/s (%.1f%%), %d succeeded, %d quota 429s", r.App, r.SustainedPerS, r.Quota, 100*r.OfQuota, r.Succeeded, r.Emu429)
	}
	b.logf("  x%g: %.0f/s sustained together of %.0f/s, %.1f µs CPU/send, peak RSS %.1f MB, load %s", scale, lv.Sustained, lv.Quota, lv.CPUMicrosPerMsg, lv.PeakRSSMB, lv.LoadAvg)
	return lv, errors.Join(errs...)
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
	fmt.Fprintf(w, "\nthree apps on one serve at its defaults, each app's emulator enforcing its rate_limit as its quota (per %s), one bulk broadcast per app at once:\n", ar.Window)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "level\tapp\tquota/s\tN\tsustained/s\tof quota\twall s\t429s\tmissing\t")
	for _, lv := range ar.Levels {
		for _, r := range lv.Apps {
			fmt.Fprintf(tw, "x%g\t%s\t%.0f\t%d\t%.0f\t%.1f%%\t%.1f\t%d\t%d\t\n", lv.Scale, r.App, r.Quota, r.N, r.SustainedPerS, 100*r.OfQuota, r.WallSeconds, r.Emu429, r.Missing)
		}
		fmt.Fprintf(tw, "x%g\tall\t%.0f\t\t%.0f\t%.1f%%\t%.1f\t\t\t\n", lv.Scale, lv.Quota, lv.Sustained, 100*lv.Sustained/lv.Quota, lv.WallSeconds)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "level\ttotal quota/s\tsustained/s\tsends/s (wall)\tCPU µs/send\tpeak RSS MB\tload after\tevery app ≥ 95%\t")
	for _, lv := range ar.Levels {
		fmt.Fprintf(tw, "x%g\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%s\t%s\t\n", lv.Scale, lv.Quota, lv.Sustained, lv.SendsPerS, lv.CPUMicrosPerMsg, lv.PeakRSSMB, lv.LoadAvg, yesNo(lv.KeptUp))
	}
	tw.Flush()
	switch {
	case ar.FellShortAt > 0 && ar.KeptUpTo > 0:
		fmt.Fprintf(w, "one instance kept every app at ≥ 95%% of its quota up to %.0f/s in all; at %.0f/s it did not\n", ar.KeptUpTo, ar.FellShortAt)
	case ar.FellShortAt > 0:
		fmt.Fprintf(w, "one instance did not keep every app at ≥ 95%% of its quota even at %.0f/s in all\n", ar.FellShortAt)
	default:
		fmt.Fprintf(w, "one instance kept every app at ≥ 95%% of its quota at every level, up to %.0f/s in all\n", ar.KeptUpTo)
	}
}
