package fcm

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"pushfan/fanout"
	"pushfan/fcmemu"
)

// A tagged message (an event token in its data and its web push link)
// goes out byte for byte the same through both clients, with the send's
// tag everywhere the placeholder was.
func TestTaggedSendsMatchTheSDK(t *testing.T) {
	emu := fcmemu.New(fcmemu.Config{}, slog.New(slog.DiscardHandler))
	rb := &recordBodies{h: emu.Handler(), bodies: map[string][]byte{}, header: map[string]http.Header{}}
	srv := httptest.NewServer(rb)
	defer srv.Close()
	msg := &fanout.Message{
		Title: "sale", Tagged: true, Delivery: fanout.Delivery{DisplayTag: "pushfan-9"},
		Data:     map[string]string{"pushfan": fanout.TagPlaceholder, "url": "https://push.example.com/v1/c/" + fanout.TagPlaceholder, "k": "v"},
		Platform: fanout.Platform{Webpush: json.RawMessage(`{"fcm_options":{"link":"https://push.example.com/v1/c/` + "\\u0001pushfan-tag\\u0001" + `"}}`)},
	}
	const tag = "k1a2b3c4d.AQIDBAUGBwgJ-_"
	var bodies [][]byte
	for i, c := range []string{ClientSDK, ClientDirect} {
		s, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1", ProjectID: "equiv", Concurrency: 4, Client: c})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		p, err := s.Prepare(msg)
		if err != nil {
			t.Fatal(err)
		}
		tp, ok := p.(fanout.TaggedPrepared)
		if !ok {
			t.Fatalf("%s: no tagged sends", c)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		token := "ok-tagged-" + string(rune('a'+i))
		if out := tp.SendTagged(ctx, token, tag, fanout.Budget{Max: 1}); out.Class != fanout.Success {
			t.Fatalf("%s: %+v", c, out)
		}
		cancel()
		b, _ := rb.take(token)
		bodies = append(bodies, bytes.ReplaceAll(b, []byte(token), []byte("TOKEN")))
	}
	if !bytes.Equal(bodies[0], bodies[1]) {
		t.Fatalf("request bodies differ:\n sdk:    %s\n direct: %s", bodies[0], bodies[1])
	}
	if n := strings.Count(string(bodies[1]), tag); n != 3 || strings.Contains(string(bodies[1]), "pushfan-tag") {
		t.Fatalf("the tag is in the body %d times (want 3: data, data link, web link), placeholder left: %s", n, bodies[1])
	}
}
