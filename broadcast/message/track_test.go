package message

import (
	"encoding/json"
	"testing"

	"pushfan/fanout"
	"pushfan/model"
)

func TestTrackRewritesTheLinksAndLeavesTheMessageAlone(t *testing.T) {
	m := &fanout.Message{
		Title: "t",
		Data:  map[string]string{"url": "https://shop.example.com/a", "k": "v"},
		Platform: fanout.Platform{
			Webpush: json.RawMessage(`{"fcm_options":{"link":"https://shop.example.com/b"},"headers":{"TTL":"60"}}`),
		},
	}
	const click = "https://push.example.com/v1/c/"
	got, err := Track(m, click, "url")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Tagged || got.Data[TagDataKey] != fanout.TagPlaceholder || got.Data["url"] != click+fanout.TagPlaceholder || got.Data["k"] != "v" {
		t.Fatalf("tracked data %q", got.Data)
	}
	var w struct {
		FCMOptions struct{ Link string } `json:"fcm_options"`
		Headers    map[string]string
	}
	if err := json.Unmarshal(got.Platform.Webpush, &w); err != nil || w.FCMOptions.Link != click+fanout.TagPlaceholder || w.Headers["TTL"] != "60" {
		t.Fatalf("tracked webpush %s (%v)", got.Platform.Webpush, err)
	}
	if m.Tagged || m.Data["url"] != "https://shop.example.com/a" || len(m.Data) != 2 {
		t.Fatalf("the original changed: %+v", m)
	}
	// Without a public URL only the token is added.
	got, _ = Track(m, "", "url")
	if got.Data["url"] != "https://shop.example.com/a" || string(got.Platform.Webpush) != string(m.Platform.Webpush) {
		t.Fatalf("links rewritten without a public URL: %+v", got)
	}
	// The stored link is the web push one, else the named data key's.
	if l := Link(model.Message{Webpush: m.Platform.Webpush, Data: m.Data, LinkKey: "url"}); l != "https://shop.example.com/b" {
		t.Fatalf("link %q", l)
	}
	if l := Link(model.Message{Data: m.Data, LinkKey: "url"}); l != "https://shop.example.com/a" {
		t.Fatalf("link %q", l)
	}
}
