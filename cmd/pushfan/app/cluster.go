package app

import (
	"context"
	"fmt"

	"pushfan/lease"
	"pushfan/model"
	"pushfan/quota"
)

// maxListedChunks bounds the cluster view's chunk list: a broadcast over
// a huge table can hold thousands of leases at once across the cluster.
const maxListedChunks = 200

// clusterReader composes the cluster view from an app's rate budget's
// members and the chunk leases of that app's broadcasts, for GET
// /push/cluster?app=: a token limited to some apps sees nothing of the
// others'.
func clusterReader(parts []*AppParts, leases *lease.Store) func(context.Context, string) (model.Cluster, error) {
	budgets := make(map[string]*quota.Coordinator, len(parts))
	for _, p := range parts {
		budgets[p.Name] = p.Quota
	}
	return func(ctx context.Context, app string) (model.Cluster, error) {
		budget, ok := budgets[app]
		if !ok {
			return model.Cluster{}, fmt.Errorf("cluster: app %q is not configured on this instance", app)
		}
		b, err := budget.Members(ctx)
		if err != nil {
			return model.Cluster{}, err
		}
		running, err := leases.ListRunning(ctx, app, maxListedChunks+1)
		if err != nil {
			return model.Cluster{}, err
		}
		out := model.Cluster{Limit: b.Limit, PausedUntil: b.PausedUntil, Members: make([]model.BudgetMember, 0, len(b.Members)),
			Chunks: make([]model.RunningChunk, 0, min(len(running), maxListedChunks))}
		for _, m := range b.Members {
			out.Members = append(out.Members, model.BudgetMember{Instance: m.Instance, Sending: m.Sending, Demand: m.Demand,
				Share: m.Share, HeartbeatAge: m.HeartbeatAge, SchemaVersion: m.Schema, Self: m.Self})
		}
		for i, r := range running {
			if i == maxListedChunks {
				out.Truncated = true
				break
			}
			out.Chunks = append(out.Chunks, model.RunningChunk{BroadcastID: r.BroadcastID, Seq: r.Seq, Class: r.Class.String(),
				Owner: r.Owner, LeaseUntil: r.LeaseUntil.UTC(), CursorID: r.CursorID, HiID: r.HiID})
		}
		return out, nil
	}
}
