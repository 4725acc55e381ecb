package audit

import (
	"context"
	"testing"

	"pushfan/model"
)

func TestTargetOfFillsThePathParameters(t *testing.T) {
	r, ok := RuleFor("POST", "/push/webhooks/:name/deliveries/:id/redeliver")
	if !ok || r.Action != WebhookRedeliver || r.When != InChange {
		t.Fatalf("rule %+v %v", r, ok)
	}
	params := map[string]string{"name": "crm{x}", "id": "9"}
	if got := r.TargetOf(func(k string) string { return params[k] }); got != "webhook:crm{x}" {
		t.Fatalf("target %q", got)
	}
	if _, ok := RuleFor("GET", "/push/audit"); ok {
		t.Fatal("a read has a rule")
	}
}

// Created names the target when the route named none, a detail beside
// the route's target otherwise; the last call wins (a transaction run
// again after a deadlock makes a new row).
func TestCreatedIsTheTargetOrADetail(t *testing.T) {
	ctx := WithPending(context.Background(), model.AuditEntry{Action: BroadcastCreate})
	Created(ctx, "broadcast", "41")
	Created(ctx, "broadcast", "42")
	if e, written, ok := Pending(ctx); !ok || written || e.Target != "broadcast:42" || e.Detail != nil {
		t.Fatalf("create: %+v %v %v", e, written, ok)
	}
	ctx = WithPending(context.Background(), model.AuditEntry{Action: JobFire, Target: "job:daily"})
	SetDetail(ctx, "k", "v")
	Created(ctx, "broadcast", "7")
	if e, _, _ := Pending(ctx); e.Target != "job:daily" || string(e.Detail) != `{"broadcast":"7","k":"v"}` {
		t.Fatalf("fire: %+v %s", e, e.Detail)
	}
	// No pending entry: nothing to do, nothing written.
	Created(context.Background(), "broadcast", "1")
	if err := Write(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}
