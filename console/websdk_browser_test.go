package console_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"pushfan/internal/devtools/demo"
)

// The web SDK end to end in a real browser: a page of another origin (an
// app's site) imports /v1/sdk/pushfan.js from pushfan and reports opens
// for the event tokens the emulator received, over a real fetch with CORS
// (PUSHFAN_EVENT_ORIGINS), and pushfan counts exactly those.
func TestWebSDKReportsEventsFromAnotherOrigin(t *testing.T) {
	// The app's origin: a port of its own on loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	appOrigin := "http://" + ln.Addr().String()
	const users = 40
	e := newEnv(t, users, "PUSHFAN_EVENT_ORIGINS="+appOrigin)
	e.emu.RecordMessages()
	var b struct {
		ID        uint64
		Status    string
		Succeeded int64
	}
	if code := e.api("POST", "/push/broadcast", map[string]any{"title": "web", "audience": map[string]any{"all": true}}, &b); code != http.StatusOK || b.Status != "completed" {
		t.Fatalf("broadcast: %d %+v", code, b)
	}
	var toks []string
	for uid := 1; uid <= users; uid++ {
		name := demo.SeedTokenName(uint64(uid), 1, uid%20 == 0)
		if got, ok, err := e.emu.LastNotification(name); err != nil {
			t.Fatal(err)
		} else if ok && e.emu.Counts(name).Accepted > 0 {
			toks = append(toks, got.Data["pushfan"])
		}
	}
	if int64(len(toks)) != b.Succeeded || len(toks) < 30 {
		t.Fatalf("%d event tokens received for %d succeeded", len(toks), b.Succeeded)
	}

	page := `<!doctype html><title>app</title><script type="module">
import { report, tokenOf } from "` + e.url + `/v1/sdk/pushfan.js";
window.reportOpens = (toks) => report("` + e.url + `", toks.map((t) => ({ token: tokenOf({ data: { pushfan: t } }), type: "opened" })));
window.sdkReady = true;
</script>`
	app := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})}}
	app.Start()
	t.Cleanup(app.Close)

	e.do("opening the app's page", 30*time.Second, chromedp.Navigate(appOrigin+"/"))
	e.waitFor("the SDK imported from pushfan", 20*time.Second, `window.sdkReady === true`)
	list := `["` + strings.Join(toks, `","`) + `"]`
	got := eval[map[string]any](e, "reporting opens", `reportOpens(`+list+`)`)
	if got["accepted"] != float64(len(toks)) || got["duplicates"] != float64(0) || len(got["refused"].([]any)) != 0 {
		t.Fatalf("first report: %v, want %d accepted", got, len(toks))
	}
	// The same again: duplicates, nothing counted twice.
	got = eval[map[string]any](e, "reporting them again", `reportOpens(`+list+`)`)
	if got["accepted"] != float64(0) || got["duplicates"] != float64(len(toks)) {
		t.Fatalf("second report: %v, want %d duplicates", got, len(toks))
	}
	var opened int64
	if err := e.db.QueryRow("SELECT COALESCE(SUM(n), 0) FROM engagement_counts WHERE broadcast_id = ? AND type = 2", b.ID).Scan(&opened); err != nil {
		t.Fatal(err)
	}
	if opened != int64(len(toks)) {
		t.Fatalf("%d opens counted, want %d", opened, len(toks))
	}
}
