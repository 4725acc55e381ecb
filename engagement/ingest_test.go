package engagement_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"pushfan/engagement"
	"pushfan/internal/testsupport/testdb"
	"pushfan/model"
)

// Events are counted per platform by the group commit that counts them,
// on testdb: a token carrying its target's platform counts there once,
// however often its event is posted (twice in a post, again in a later
// one); a click counts its implied open there too; a token signed before
// pushfan put the platform in it counts under no platform (code 0), never
// under a guessed one; a test send's counts nowhere.
func TestIngestCountsEachEventUnderItsTokensPlatformOnce(t *testing.T) {
	tdb := testdb.New(t)
	res, err := tdb.SQL.Exec(`INSERT INTO broadcasts (status, message, audience) VALUES ('completed', '{"title":"t"}', '{"all":true}')`)
	if err != nil {
		t.Fatal(err)
	}
	id64, _ := res.LastInsertId()
	id := uint64(id64)
	keys, err := engagement.NewKeys([]engagement.Key{{ID: "k1", Secret: bytes.Repeat([]byte("K"), 32)}})
	if err != nil {
		t.Fatal(err)
	}
	g := engagement.NewIngester(tdb.Store, keys, slog.New(slog.NewTextHandler(io.Discard, nil)), 10*time.Second)
	g.Start(t.Context())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	tags := engagement.NewTagger(keys, time.Hour, "")
	ios := tags.Tag(id, 1, 11, 0, 0, model.PlatformIOS)
	android := tags.Tag(id, 2, 12, 0, 0, "Android") // as a table may spell it
	none := tags.Tag(id, 3, 13, 0, 0, "")           // a Source that reads no platform: other, as its send counts
	now := time.Now()
	old := keys.Token(engagement.Claims{BroadcastID: id, Target: 4, UserID: 14, Sent: now, Expires: now.Add(time.Hour)})

	ingest := func(evs ...engagement.RawEvent) engagement.Answer {
		t.Helper()
		a, err := g.Ingest(t.Context(), evs)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	opened := func(tok string) engagement.RawEvent { return engagement.RawEvent{Token: tok, Type: "opened"} }
	a := ingest(opened(ios), opened(ios), engagement.RawEvent{Token: android, Type: "clicked"}, opened(none), opened(old),
		engagement.RawEvent{Token: tags.TestTag(id), Type: "opened"})
	if a.Accepted != 5 || a.Duplicates != 1 || len(a.Refused) != 0 {
		t.Fatalf("first post: %+v, want 5 accepted (the test send's among them) and 1 duplicate", a)
	}
	// The app retries the whole post (its answer lost), and opens the
	// clicked one: all duplicates.
	a = ingest(opened(ios), engagement.RawEvent{Token: android, Type: "clicked"}, opened(android), opened(none), opened(old))
	if a.Accepted != 0 || a.Duplicates != 5 || len(a.Refused) != 0 {
		t.Fatalf("the retry: %+v, want 5 duplicates", a)
	}

	counts := func(q string) string {
		t.Helper()
		rows, err := tdb.SQL.Query(q, id)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := ""
		for rows.Next() {
			var key, typ, n int64
			if err := rows.Scan(&key, &typ, &n); err != nil {
				t.Fatal(err)
			}
			out += fmt.Sprintf("%d/%s=%d ", key, model.EventType(typ), n)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Platform codes: 0 not known, then android 1, ios 2, web 3, other 4.
	if got, want := counts("SELECT platform, type, n FROM engagement_platform_counts WHERE broadcast_id = ? ORDER BY platform, type"),
		"0/opened=1 1/opened=1 1/clicked=1 2/opened=1 4/opened=1 "; got != want {
		t.Fatalf("per platform: %s, want %s", got, want)
	}
	if got, want := counts("SELECT variant, type, n FROM engagement_counts WHERE broadcast_id = ? ORDER BY type"),
		"0/opened=4 0/clicked=1 "; got != want {
		t.Fatalf("the counts: %s, want %s", got, want)
	}
}
