package broadcast_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"pushfan/broadcast"
	"pushfan/broadcast/rules"
	"pushfan/internal/testsupport/testdb"
	"pushfan/model"
	"pushfan/repository"
)

// With the four-eyes setting a held broadcast is edited by no one (Edit
// takes no actor: the rule holds whoever asks; an edit between the
// approver's reading and the release would go out unreviewed); the
// release starts the broadcast with the text as it was held. A scheduled broadcast that is not held is still edited, by the
// submit's own rules.
func TestAHeldBroadcastIsNotEditedUnderFourEyes(t *testing.T) {
	tdb := testdb.New(t)
	ctx := t.Context()
	const n = 20
	tdb.SQL.MustExec(fmt.Sprintf("INSERT INTO users (id) SELECT seq FROM seq_1_to_%d", n))
	tdb.SQL.MustExec(fmt.Sprintf("INSERT INTO device_tokens (user_id, token) SELECT seq, CONCAT('t-', seq) FROM seq_1_to_%d ORDER BY seq", n))
	sent := &countingSender{pause: time.Millisecond, per: map[string]int{}}
	svc, rd := startService(t, tdb, "one", repository.SchemaVersion(), sent, broadcast.Options{FourEyes: true,
		Rules: rules.Rules{MaxUserIDs: 1000, Horizon: 24 * time.Hour, RateLimit: 1e6}})
	creator := model.Actor{Kind: model.ActorKey, ID: "creator", Name: "marketing"}
	submit := func(spec rules.Spec) *model.Broadcast {
		t.Helper()
		req, err := svc.Validate(spec)
		if err != nil {
			t.Fatal(err)
		}
		req.Creator = creator
		b, _, err := svc.Submit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	held := submit(rules.Spec{Title: "as reviewed", Body: "b", Audience: &rules.AudienceSpec{All: true}, Hold: true})
	if held.Status != model.StatusHeld {
		t.Fatalf("submitted with hold: status %s", held.Status)
	}
	_, err := svc.Edit(ctx, held.ID, broadcast.EditSpec{Title: "changed after review", Body: "b"})
	if !errors.Is(err, rules.ErrEditFourEyes) {
		t.Fatalf("edit of a held broadcast under four eyes: %v, want ErrEditFourEyes", err)
	}
	released, err := svc.Release(ctx, held.ID, model.Actor{Kind: model.ActorKey, ID: "approver", Name: "lead"})
	if err != nil {
		t.Fatal(err)
	}
	if released.Message.Title != "as reviewed" {
		t.Fatalf("released title %q", released.Message.Title)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := rd.Get(ctx, held.ID)
		if err != nil {
			t.Fatal(err)
		}
		if b.Status == model.StatusCompleted {
			if b.Message.Title != "as reviewed" || b.Succeeded != n || sent.sent.Load() != n {
				t.Fatalf("completed: title %q, succeeded %d, sent %d; want the held text to %d", b.Message.Title, b.Succeeded, sent.sent.Load(), n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("released broadcast is %s after 30 s", b.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}

	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	scheduled := submit(rules.Spec{Title: "first", Body: "b", Audience: &rules.AudienceSpec{All: true}, SendAt: at.Format(time.RFC3339)})
	if scheduled.Status != model.StatusScheduled {
		t.Fatalf("submitted with send_at: status %s", scheduled.Status)
	}
	edited, err := svc.Edit(ctx, scheduled.ID, broadcast.EditSpec{Title: "second", Body: "b"})
	if err != nil {
		t.Fatalf("edit of a scheduled broadcast under four eyes: %v", err)
	}
	if edited.Message.Title != "second" || edited.SendAt == nil || !edited.SendAt.Equal(at) {
		t.Fatalf("edited: title %q, send_at %v; want second at %v", edited.Message.Title, edited.SendAt, at)
	}
}
