package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
)

// transactional sends to 1-3 users of the default app (none with a dead
// token) and waits for the answer, which comes when the send is final.
func (l *load) transactional(ctx context.Context, rng *rand.Rand) error {
	n := 1 + rng.IntN(3)
	ids := make([]uint64, 0, n)
	for len(ids) < n {
		if uid := uint64(1 + rng.IntN(l.s.cfg.users)); uid%100 != 0 {
			ids = append(ids, uid)
		}
	}
	devices := int64(n) // every 10th user has a second device (seed)
	for _, uid := range ids {
		if uid%10 == 0 {
			devices++
		}
	}
	return l.sendNow(ctx, rng, defaultApp, "transactional", ids, devices)
}

// partnerTransactional is transactional for 1-3 users of the partner app.
func (l *load) partnerTransactional(ctx context.Context, rng *rand.Rand) error {
	n := 1 + rng.IntN(3)
	ids := make([]uint64, 0, n)
	devices := int64(0)
	for len(ids) < n {
		k := 1 + rng.IntN(partnerUsers)
		if k%partnerDeadEvery == 0 {
			continue
		}
		ids = append(ids, uint64(partnerBase+k))
		devices++
		if k%partnerTwoEvery == 0 {
			devices++
		}
	}
	return l.sendNow(ctx, rng, partnerApp, "partner transactional", ids, devices)
}

// partnerBulk sends to every token of the partner app: a walk of the
// shared device_tokens table, its rows interleaved with the default app's.
// A quarter are canceled at a random moment, as the default app's are.
func (l *load) partnerBulk(ctx context.Context, rng *rand.Rand) error {
	id, err := l.submit(ctx, rng, "partner bulk all", "/push/broadcast?wait=0", map[string]any{"app": partnerApp, "title": "partner bulk", "body": "to every partner user", "audience": map[string]any{"all": true}})
	if err != nil {
		return err
	}
	if rng.IntN(4) == 0 {
		l.later(time.Now().Add(between(rng, 0, 15*time.Second)), id, "cancel")
	}
	return nil
}

// sendNow posts a transactional send of app to the users ids (devices
// tokens in all, none dead) on a live replica and waits for the answer:
// it must be completed with every device succeeded within 2 s, unless a
// fault that may slow app's sends was on near its start or its end
// (faultLog.excuses: a storm of the other app's emulator is no excuse).
func (l *load) sendNow(ctx context.Context, rng *rand.Rand, app, kind string, ids []uint64, devices int64) error {
	live := l.s.live()
	if len(live) == 0 {
		return nil
	}
	start := time.Now()
	status, raw, err := call(ctx, l.hc, live[rng.IntN(len(live))], "POST", "/push/broadcast", "", map[string]any{"app": app, "title": "your order shipped", "audience": map[string]any{"user_ids": ids}})
	took := time.Since(start)
	if ctx.Err() != nil {
		return errStopped
	}
	var b broadcastAnswer
	ok := err == nil && status == http.StatusOK && json.Unmarshal(raw, &b) == nil && b.Status == "completed" && b.Succeeded == devices
	l.mu.Lock()
	l.txn = append(l.txn, txnSend{app, start, took, ok})
	l.submitted[kind]++
	l.mu.Unlock()
	if (!ok || took > 2*time.Second) && !l.s.faults.excuses(start, txnGrace, app) && !l.s.faults.excuses(start.Add(took), txnGrace, app) {
		l.run.violate(b.ID, fmt.Sprintf("a transactional send of app %s to %v outside the windows of the faults that touch it took %v: status %d, %v, %s", app, ids, took.Round(time.Millisecond), status, err, raw))
	}
	return nil
}

// txnGrace is how long after a fault a transactional send may still be
// slow: the budget's shares settle in about 2 s after a member goes, the
// rate ramps up after a storm, pools reconnect after a database cut.
const txnGrace = 15 * time.Second
