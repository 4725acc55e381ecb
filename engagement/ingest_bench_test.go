package engagement_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"pushfan/engagement"
	"pushfan/internal/testsupport/testdb"
)

// A post of MaxEvents fresh opens (each a target of its own) through the
// group commit, on testdb: what one more counts statement per commit
// costs. The tokens are signed without a platform so that the benchmark
// builds on the release before too (the statement runs either way).
func BenchmarkIngestPost(b *testing.B) {
	tdb := testdb.New(b)
	res, err := tdb.SQL.Exec(`INSERT INTO broadcasts (status, message, audience) VALUES ('completed', '{"title":"t"}', '{"all":true}')`)
	if err != nil {
		b.Fatal(err)
	}
	id, _ := res.LastInsertId()
	keys, _ := engagement.NewKeys([]engagement.Key{{ID: "k1", Secret: bytes.Repeat([]byte("K"), 32)}})
	g := engagement.NewIngester(tdb.Store, keys, slog.New(slog.NewTextHandler(io.Discard, nil)), 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Start(ctx)
	defer func() { _ = g.Stop(context.Background()) }()
	now := time.Now()
	target := uint64(0)
	evs := make([]engagement.RawEvent, engagement.MaxEvents)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := range evs {
			target++
			evs[i] = engagement.RawEvent{Type: "opened", Token: keys.Token(engagement.Claims{BroadcastID: uint64(id), Target: target, UserID: target, Sent: now, Expires: now.Add(time.Hour)})}
		}
		b.StartTimer()
		a, err := g.Ingest(ctx, evs)
		if err != nil || a.Accepted != len(evs) {
			b.Fatalf("%+v %v", a, err)
		}
	}
}
