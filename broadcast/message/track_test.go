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
	stored := model.Message{Data: m.Data, LinkKey: "url", Webpush: m.Platform.Webpush}
	got, err := Track(m, stored, click)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Tagged || got.Data[TagDataKey] != fanout.TagPlaceholder || got.Data["url"] != click+fanout.TagPlaceholder+DataLinkSuffix || got.Data["k"] != "v" {
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
	got, _ = Track(m, stored, "")
	if got.Data["url"] != "https://shop.example.com/a" || string(got.Platform.Webpush) != string(m.Platform.Webpush) {
		t.Fatalf("links rewritten without a public URL: %+v", got)
	}
	// A click leads to the link it was sent in place of.
	if l := Link(stored, 0, false); l != "https://shop.example.com/b" {
		t.Fatalf("web link %q", l)
	}
	if l := Link(stored, 0, true); l != "https://shop.example.com/a" {
		t.Fatalf("data link %q", l)
	}
	// Over plain http FCM takes no web push link: only the data link goes
	// through the redirect. A templated link is left alone.
	got, _ = Track(m, stored, "http://push.example.com/v1/c/")
	if string(got.Platform.Webpush) != string(m.Platform.Webpush) || got.Data["url"] != "http://push.example.com/v1/c/"+fanout.TagPlaceholder+DataLinkSuffix {
		t.Fatalf("over http: %+v", got)
	}
	tmpl := stored
	tmpl.Data = map[string]string{"url": "https://shop.example.com/{{.path}}"}
	if got, _ = Track(&fanout.Message{Data: tmpl.Data}, tmpl, click); got.Data["url"] != "https://shop.example.com/{{.path}}" {
		t.Fatalf("a templated link was rewritten: %q", got.Data["url"])
	}
	// An A/B variant's link is its own.
	ab := model.Message{Variants: []model.ABVariant{{Name: "a", Message: model.Message{Data: map[string]string{"u": "https://a.example.com"}, LinkKey: "u"}},
		{Name: "b", Message: model.Message{Data: map[string]string{"u": "https://b.example.com"}, LinkKey: "u"}}}}
	if l := Link(ab, 2, true); l != "https://b.example.com" {
		t.Fatalf("variant b's link %q", l)
	}
}
