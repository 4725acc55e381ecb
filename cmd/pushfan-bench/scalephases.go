package main

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// pacedAll names the "all" at max_rate 50 among the kinds.
const pacedAll = "all at max_rate 50"

// allKinds submits one broadcast of every kind, timing each answer, and
// cancels each once its plan is complete (timing the plan of the large
// ones).
func (m *scaleMeasure) allKinds(ctx context.Context) error {
	all := map[string]any{"all": true}
	tomorrow := time.Now().UTC().Add(24*time.Hour).Format("2006-01-02") + "T12:00:00"
	// A finished broadcast with 500,000 failures, for the resend.
	if _, err := m.db.ExecContext(ctx, `INSERT INTO broadcasts (id, status, message, audience, targeted, failed, finished_at, planned_at)
		VALUES (999999999, 'completed', '{"title":"x"}', '{"all":true}', 500000, 500000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`); err != nil {
		return fmt.Errorf("resend fixture: %w", err)
	}
	if _, err := m.db.ExecContext(ctx, `INSERT INTO broadcast_failures (broadcast_id, token_id, user_id, code)
		SELECT 999999999, seq * 2, seq, 'UNAVAILABLE' FROM seq_1_to_500000`); err != nil {
		return fmt.Errorf("resend fixture: %w", err)
	}
	held, _, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "held", "audience": all, "hold": true})
	if err != nil {
		return err
	}
	var uids []uint64
	for u := uint64(1); u <= 10000; u++ {
		uids = append(uids, u*97)
	}
	type kind struct {
		name, path string
		body       any
	}
	kinds := []kind{
		{"all", "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all}},
		// Paced: it sends at 50/s while its plan counts the audience, which
		// its pace must not slow (issue 38: it rested beside its own sends).
		{pacedAll, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all, "max_rate": 50}},
		{"10k user_ids", "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": map[string]any{"user_ids": uids}}},
		{"named audience", "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": map[string]any{"name": "everyone"}}},
		{"send_at_local", "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all, "send_at_local": tomorrow}},
		{"quiet_hours", "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all, "quiet_hours": map[string]any{"start": "22:00", "end": "08:00"}}},
		// A named audience's zones come from the users table by user id, a
		// page at a time (issue 39): its plan against the built-in one's.
		{"named send_at_local", "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": map[string]any{"name": "everyone"}, "send_at_local": tomorrow}},
		{"resend", "/push/broadcasts/999999999/resend?wait=0", map[string]any{}},
		{"release of a held one", fmt.Sprintf("/push/broadcasts/%d/release", held.ID), nil},
	}
	var allTargeted int64
	for _, k := range kinds {
		m.setPhase("plan: " + k.name)
		t0 := time.Now()
		v, took, err := m.post(ctx, k.path, k.body)
		if err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
		m.sr.SubmitMS[k.name] = ms(took)
		pv, planned, err := m.waitPlanned(ctx, v.ID, t0)
		if err != nil {
			return err
		}
		m.sr.TargetedKnown[k.name] = planned
		m.b.logf("  %s: answered in %.0f ms (%s), %d targets planned after %.1f s", k.name, ms(took), v.Status, pv.Targeted, planned)
		switch k.name {
		case "all":
			allTargeted = pv.Targeted
		case pacedAll:
			if pv.Targeted != allTargeted {
				return fmt.Errorf("%s: targeted %d once planned, the all's was %d", k.name, pv.Targeted, allTargeted)
			}
			m.sr.PacedSentBeforeTargeted = pv.Succeeded + pv.Failed + pv.Canceled + pv.Capped
			m.b.logf("  %s: %d sent before its targeted was known", k.name, m.sr.PacedSentBeforeTargeted)
		}
		if k.name == "send_at_local" && planned > 0 {
			m.sr.PlanRowsPerS = float64(pv.Targeted) / planned
		}
		if !pv.Final() {
			if _, err := m.cancel(ctx, v.ID); err != nil {
				return err
			}
		}
	}
	m.setPhase("")
	// The deployment's default quiet hours: its own serve, for the submit.
	qsvc, err := m.b.scaleService(ctx, m.emu, benchDB{dsn: m.svc.dsn()}, "serve-quiet", "PUSHFAN_QUIET_HOURS=22:00-08:00", "PUSHFAN_PLAN_PARALLEL=0")
	if err != nil {
		return err
	}
	defer qsvc.stop()
	qm := &scaleMeasure{b: m.b, svc: qsvc, emu: m.emu, db: m.db, sr: m.sr}
	v, took, err := qm.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all})
	if err != nil {
		return err
	}
	m.sr.SubmitMS["the default quiet hours"] = ms(took)
	m.b.logf("  the default quiet hours: answered in %.0f ms (%s)", ms(took), v.Status)
	_, err = qm.cancel(ctx, v.ID)
	return err
}

// firstMinute sends an "all" for 60 s at the default rate limit: the time
// to the first send, and the sends of each second.
func (m *scaleMeasure) firstMinute(ctx context.Context) error {
	if err := m.emu.reset(ctx); err != nil {
		return err
	}
	m.setPhase("first minute of an all")
	defer m.setPhase("")
	cpu0, _ := procCPU(m.svc.p.pid())
	db0, err := globalStatus(ctx, m.db)
	if err != nil {
		return err
	}
	t0 := time.Now()
	v, took, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": map[string]any{"all": true}})
	if err != nil {
		return err
	}
	m.sr.SubmitMS["all (sent)"] = ms(took)
	var last int64
	next := t0.Add(time.Second)
	for sec := 0; sec < 60; {
		st, err := m.emu.stats(ctx)
		if err != nil {
			return err
		}
		if m.sr.FirstSendMS == 0 && st.Accepted > 0 {
			m.sr.FirstSendMS = ms(time.Since(t0))
		}
		if now := time.Now(); !now.Before(next) {
			m.sr.PerSecond = append(m.sr.PerSecond, st.Accepted-last)
			last = st.Accepted
			next = next.Add(time.Second)
			sec++
			if sec == 10 {
				if pv, err := m.get(ctx, v.ID); err == nil && pv.Planned() {
					m.sr.TargetedKnown["all (sent)"] = pv.PlannedAt.Sub(pv.CreatedAt).Seconds()
				}
			}
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	db1, err := globalStatus(ctx, m.db)
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	m.sr.DB = map[string]float64{}
	for k, v := range db1 {
		m.sr.DB[k] = (v - db0[k]) / secs
	}
	if m.sr.Tables, err = tableSizes(ctx, m.db); err != nil {
		return err
	}
	m.sr.First60PerS = float64(last) / 60
	m.sr.MinSecondPerS = m.sr.PerSecond[0]
	for _, n := range m.sr.PerSecond {
		m.sr.MinSecondPerS = min(m.sr.MinSecondPerS, n)
	}
	if _, ok := m.sr.TargetedKnown["all (sent)"]; !ok {
		m.setPhase("the all, after its first minute, until planned")
		pv, _, err := m.waitPlanned(ctx, v.ID, t0)
		if err != nil {
			return err
		}
		if pv.Planned() {
			m.sr.TargetedKnown["all (sent)"] = pv.PlannedAt.Sub(pv.CreatedAt).Seconds()
		}
	}
	if err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM broadcast_chunks WHERE broadcast_id = ?", v.ID).Scan(&m.sr.ChunkRowsPlaced); err != nil {
		return err
	}
	cpu1, _ := procCPU(m.svc.p.pid())
	m.b.logf("  first minute of an all: first send after %.0f ms, %.0f/s over 60 s (slowest second %d), serve CPU %.1f s",
		m.sr.FirstSendMS, m.sr.First60PerS, m.sr.MinSecondPerS, (cpu1 - cpu0).Seconds())
	took, err = m.cancel(ctx, v.ID)
	m.sr.CancelMS["running"] = ms(took)
	return err
}

// cancels times a cancel in each state a broadcast can be canceled in.
func (m *scaleMeasure) cancels(ctx context.Context) error {
	all := map[string]any{"all": true}
	tomorrow := time.Now().UTC().Add(24*time.Hour).Format("2006-01-02") + "T12:00:00"
	// planning: canceled right after the submit, while its plan runs.
	v, _, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all, "send_at_local": tomorrow})
	if err != nil {
		return err
	}
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	cur, err := m.get(ctx, v.ID)
	if err != nil {
		return err
	}
	state := "planning"
	if cur.Planned() {
		state = "planning (it had finished: waiting zones)"
	}
	took, err := m.cancel(ctx, v.ID)
	if err != nil {
		return err
	}
	m.sr.CancelMS[state] = ms(took)
	// waiting zones: planned, every zone ahead.
	v, _, err = m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "a", "audience": all, "send_at_local": tomorrow})
	if err != nil {
		return err
	}
	if _, _, err := m.waitPlanned(ctx, v.ID, time.Now()); err != nil {
		return err
	}
	if took, err = m.cancel(ctx, v.ID); err != nil {
		return err
	}
	m.sr.CancelMS["waiting zones"] = ms(took)
	for _, c := range []struct {
		name string
		body map[string]any
	}{
		{"held", map[string]any{"title": "a", "audience": all, "hold": true}},
		{"scheduled", map[string]any{"title": "a", "audience": all, "send_at": time.Now().Add(time.Hour).Format(time.RFC3339)}},
	} {
		v, _, err := m.post(ctx, "/push/broadcast?wait=0", c.body)
		if err != nil {
			return err
		}
		if took, err = m.cancel(ctx, v.ID); err != nil {
			return err
		}
		m.sr.CancelMS[c.name] = ms(took)
	}
	names := make([]string, 0, len(m.sr.CancelMS))
	for k := range m.sr.CancelMS {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		m.b.logf("  cancel while %s: final after %.0f ms", k, m.sr.CancelMS[k])
	}
	return nil
}

// urgentWithWaiting times 20 three-user sends (submit to all three
// delivered) on an idle table, then again with 20 local-time broadcasts of
// every token waiting.
func (m *scaleMeasure) urgentWithWaiting(ctx context.Context) error {
	idle, err := m.urgentSends(ctx, 20)
	if err != nil {
		return err
	}
	tomorrow := time.Now().UTC().Add(24*time.Hour).Format("2006-01-02") + "T12:00:00"
	var ids []uint64
	for range 20 {
		v, _, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "later", "audience": map[string]any{"all": true}, "send_at_local": tomorrow})
		if err != nil {
			return err
		}
		ids = append(ids, v.ID)
	}
	for _, id := range ids {
		if _, _, err := m.waitPlanned(ctx, id, time.Now()); err != nil {
			return err
		}
	}
	if err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM broadcast_chunks WHERE status = 'waiting'").Scan(&m.sr.Urgent.WaitingChunks); err != nil {
		return err
	}
	busy, err := m.urgentSends(ctx, 20)
	if err != nil {
		return err
	}
	m.sr.Urgent.IdleMS, m.sr.Urgent.WaitingMS = median(idle), median(busy)
	if m.sr.Urgent.IdleMS > 0 {
		m.sr.Urgent.Ratio = m.sr.Urgent.WaitingMS / m.sr.Urgent.IdleMS
	}
	m.b.logf("  a 3-user send: %.1f ms idle, %.1f ms with %d waiting chunks (%.2fx)", m.sr.Urgent.IdleMS, m.sr.Urgent.WaitingMS,
		m.sr.Urgent.WaitingChunks, m.sr.Urgent.Ratio)
	for _, id := range ids {
		if _, err := m.cancel(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// urgentSends times count three-user sends, submit to delivered (the
// emulator accepted all three), one after another.
func (m *scaleMeasure) urgentSends(ctx context.Context, count int) ([]float64, error) {
	var out []float64
	for i := range count {
		st0, err := m.emu.stats(ctx)
		if err != nil {
			return nil, err
		}
		base := uint64(1000 + 3*i)
		t0 := time.Now()
		if _, _, err := m.post(ctx, "/push/broadcast?wait=0", map[string]any{"title": "code", "audience": map[string]any{"user_ids": []uint64{base, base + 1, base + 2}}}); err != nil {
			return nil, err
		}
		for {
			st, err := m.emu.stats(ctx)
			if err != nil {
				return nil, err
			}
			if st.Accepted-st0.Accepted >= 6 { // two tokens per user
				break
			}
			if time.Since(t0) > 30*time.Second {
				return nil, fmt.Errorf("a 3-user send not delivered after 30 s")
			}
			if err := sleep(ctx, time.Millisecond); err != nil {
				return nil, err
			}
		}
		out = append(out, ms(time.Since(t0)))
	}
	return out, nil
}
