package genclient_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"pushfan/internal/testsupport/genclient"
	"pushfan/internal/testsupport/teststack"
)

// TestGeneratedClientDrivesABroadcast drives one broadcast through the
// client oapi-codegen generated, as an admin panel written in Go would:
// submit, read it while it sends, cancel it, and get a 400 decoded into
// the error type. The stack's HTTP client also validates every exchange
// against the document, so the generated requests conform to it too.
func TestGeneratedClientDrivesABroadcast(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	const targets = 300
	names := make([]string, targets)
	for i := range names {
		names[i] = fmt.Sprintf("gen-%d", i)
	}
	s.SeedTokens(1, names)
	client, err := genclient.NewClientWithResponses(s.API.URL, genclient.WithHTTPClient(s.HTTP),
		genclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+teststack.AdminToken)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	// Submit, answered at once, paced at 10 messages a second: 300
	// targets take 30 s, time enough to read it and cancel it mid-way.
	all := true
	sub, err := client.CreateBroadcastWithResponse(ctx, nil, genclient.BroadcastRequest{
		Audience: genclient.AudienceRequest{All: &all},
		Title:    ptr("Hello"),
		Body:     ptr("From the generated Go client"),
		MaxRate:  ptr[float32](10),
		Wait:     ptr(false),
	})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if sub.StatusCode() != http.StatusAccepted || sub.JSON202 == nil || sub.Headers202 == nil {
		t.Fatalf("submit: %d %s, want 202 with the broadcast", sub.StatusCode(), sub.Body)
	}
	b := *sub.JSON202
	if sub.Headers202.Location != fmt.Sprintf("/push/broadcasts/%d", b.Id) || b.App != "default" ||
		b.Audience.All == nil || !bool(*b.Audience.All) || b.Message.Title == nil || *b.Message.Title != "Hello" ||
		b.MaxRate == nil || *b.MaxRate != 10 || b.Trigger != genclient.Api || b.FinishedAt != nil ||
		b.Targeted != nil || !b.Planning { // its audience is counted after the answer: null, never 0
		t.Fatalf("submit answered %+v (Location %q)", b, sub.Headers202.Location)
	}

	// Read it until its audience is counted and its first sends are.
	var read genclient.Broadcast
	teststack.WaitEvery(t, "the paced broadcast's first sends", 30*time.Second, 20*time.Millisecond, func() bool {
		got, err := client.GetBroadcastWithResponse(ctx, b.Id)
		if err != nil || got.JSON200 == nil {
			t.Fatalf("read: %v %d %s", err, got.StatusCode(), got.Body)
		}
		read = *got.JSON200
		if read.FinishedAt != nil {
			t.Fatalf("the broadcast ended before the cancel: %+v", read)
		}
		return read.Succeeded > 0 && read.Targeted != nil
	})
	if read.Id != b.Id || read.Status != genclient.StatusRunning || read.StartedAt == nil || read.Succeeded >= targets ||
		*read.Targeted != targets || read.Planning {
		t.Fatalf("read %+v, want broadcast %d running with its first sends", read, b.Id)
	}

	// Cancel: final in the answer, every target counted once.
	cancel, err := client.CancelBroadcastWithResponse(ctx, b.Id)
	if err != nil || cancel.JSON200 == nil {
		t.Fatalf("cancel: %v %d %s", err, cancel.StatusCode(), cancel.Body)
	}
	c := *cancel.JSON200
	if c.Status != genclient.StatusCanceled || c.FinishedAt == nil || c.Targeted == nil || *c.Targeted != targets || c.Failed != 0 || c.Capped != 0 ||
		c.Succeeded+c.Canceled != targets || c.Succeeded < read.Succeeded || c.Canceled == 0 {
		t.Fatalf("cancel answered %+v, want canceled with its %d targets sent or canceled", c, targets)
	}
	t.Logf("read: %s, %d of %d sent; canceled: %d sent, %d canceled", read.Status, read.Succeeded, *read.Targeted, c.Succeeded, c.Canceled)

	// A 400, decoded into the error type: a send_at in the past (a rule
	// the schema cannot state), with nothing created.
	past := time.Now().Add(-time.Minute)
	bad, err := client.CreateBroadcastWithResponse(ctx, nil, genclient.BroadcastRequest{
		Audience: genclient.AudienceRequest{All: &all},
		Title:    ptr("Too late"),
		SendAt:   &past,
	})
	if err != nil {
		t.Fatalf("bad submit: %v", err)
	}
	if bad.StatusCode() != http.StatusBadRequest || bad.JSON400 == nil {
		t.Fatalf("bad submit: %d %s, want 400 with the error object", bad.StatusCode(), bad.Body)
	}
	if e := bad.JSON400.Error; e.Code != "send_at_in_past" || e.Field == nil || *e.Field != "send_at" || !strings.Contains(e.Message, "not in the future") {
		t.Fatalf("bad submit's error %+v (field %v), want send_at_in_past on send_at", e, e.Field)
	}
	list, err := client.ListBroadcastsWithResponse(ctx, nil)
	if err != nil || list.JSON200 == nil {
		t.Fatalf("list: %v %d %s", err, list.StatusCode(), list.Body)
	}
	if n := len(list.JSON200.Broadcasts); n != 1 || list.JSON200.Broadcasts[0].Id != b.Id {
		t.Fatalf("listed %d broadcasts (%+v), want only the canceled one", n, list.JSON200.Broadcasts)
	}

	// The emulator received exactly the sends counted succeeded: stop the
	// instance (its chunk runs and their sends have ended when Stop
	// returns), then count.
	stopCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	if err := s.Service.Stop(stopCtx); err != nil {
		t.Fatalf("stopping the instance: %v", err)
	}
	if accepted := s.Emu.Stats().Accepted; accepted != int64(c.Succeeded) {
		t.Fatalf("the emulator accepted %d sends, the canceled broadcast counts %d succeeded", accepted, c.Succeeded)
	}
}

func ptr[T any](v T) *T { return &v }
