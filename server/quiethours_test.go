package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"pushfan/config"
	"pushfan/internal/testsupport/teststack"
)

// defaultQuiet is the deployment's quiet hours in these tests.
const defaultQuiet = "22:00-08:00"

// zoneAt23 is a whole-hour zone whose local time is 23:xx now: inside
// 22:00-08:00 with at least 8 hours to its end (the hour rolling over to
// 00:xx during the test keeps it inside). Etc/GMT names are sign-inverted:
// Etc/GMT-9 is UTC+9.
func zoneAt23(t *testing.T) string {
	t.Helper()
	off := (23 - time.Now().UTC().Hour() + 24) % 24 // hours east of UTC
	if off > 14 {
		off -= 24 // Etc/GMT zones run from UTC-12 to UTC+14
	}
	name := "UTC"
	if off != 0 {
		name = fmt.Sprintf("Etc/GMT%+d", -off)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	if h := time.Now().In(loc).Hour(); h != 23 && h != 0 {
		t.Fatalf("zone %s is at %d:xx, want 23:xx", name, h)
	}
	return name
}

// quietStack is a stack with PUSHFAN_QUIET_HOURS=22:00-08:00.
func quietStack(t *testing.T) *teststack.Stack {
	return teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.Engine.QuietHours = defaultQuiet
	}})
}

func submit(t *testing.T, s *teststack.Stack, body map[string]any) teststack.Broadcast {
	t.Helper()
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast?wait=false", body, &b)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit %v: %d %+v", body, resp.StatusCode, b)
	}
	return s.WaitPlanned(b.ID, 10*time.Second) // its counts, once planned
}

// assertDeferredOne checks a broadcast whose one target (tok) the quiet window
// defers: counted deferred and waiting, sent nothing; then cancels it and
// checks that the target counts canceled and still got nothing.
func assertDeferredOne(t *testing.T, s *teststack.Stack, what string, b teststack.Broadcast, tok string) {
	t.Helper()
	if b.Targeted != 1 || b.Deferred == nil || *b.Deferred != 1 || waiting(b) != 1 || b.QuietHours == nil ||
		b.QuietHours.Start != "22:00" || b.QuietHours.End != "08:00" {
		t.Fatalf("%s: %+v (want targeted 1, deferred 1, waiting 1, quiet hours 22:00-08:00)", what, b)
	}
	assertNone(t, s, what, []string{tok})
	var c teststack.Broadcast
	if resp := s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", b.ID), nil, &c); resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: cancel: %d %+v", what, resp.StatusCode, c)
	}
	c = s.WaitFinished(b.ID, 10*time.Second)
	if c.Status != "canceled" || c.Succeeded != 0 || c.Canceled != 1 || waiting(c) != 0 {
		t.Fatalf("%s: canceled: %+v (want canceled 1, succeeded 0)", what, c)
	}
	assertNone(t, s, what+", after the cancel", []string{tok})
}

// A one-user send at 23:00 local with PUSHFAN_QUIET_HOURS=22:00-08:00:
// transactional (by its size), the default does not delay it. The same
// send as class bulk, and a transactional one naming its own window, wait
// for 08:00.
func TestDefaultQuietHoursSkipTransactional(t *testing.T) {
	t.Parallel()
	s := quietStack(t)
	zone := zoneAt23(t)
	toks := seedZoned(t, s, 1, "qt-", []string{zone, zone, zone}) // qt-0 user 1, qt-1 user 2, qt-2 user 3

	// Submitted first, so the transactional send's delivery below has
	// gone through the same engine after it.
	bulk := submit(t, s, map[string]any{"title": "digest", "body": "b", "class": "bulk",
		"audience": map[string]any{"user_ids": []int{2}}})
	own := submit(t, s, map[string]any{"title": "code", "body": "asked for quiet", "audience": map[string]any{"user_ids": []int{3}},
		"quiet_hours": map[string]any{"start": "22:00", "end": "08:00"}})
	if bulk.Class != "bulk" || own.Class != "transactional" {
		t.Fatalf("classes: %q and %q, want bulk and transactional", bulk.Class, own.Class)
	}

	var code teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "Your code", "body": "123456",
		"audience": map[string]any{"user_ids": []int{1}}}, &code)
	if resp.StatusCode != http.StatusOK || code.Class != "transactional" || code.Status != "completed" ||
		code.Targeted != 1 || code.Succeeded != 1 || code.Failed != 0 || code.QuietHours != nil || code.Deferred != nil {
		t.Fatalf("transactional send at 23:00 local: %d %+v (want 200 completed, transactional, succeeded 1, no quiet hours)", resp.StatusCode, code)
	}
	if c := s.Emu.Counts(toks[0]); c.Accepted != 1 || c.Attempts != 1 {
		t.Fatalf("the one-time code's token: %+v, want exactly 1 accepted", c)
	}

	assertDeferredOne(t, s, "the same send as class bulk", getBroadcast(s, bulk.ID), toks[1])
	assertDeferredOne(t, s, "a transactional send with its own quiet_hours", getBroadcast(s, own.ID), toks[2])
}

// "quiet_hours": null and false switch the deployment's default off: a
// bulk `all` broadcast at 23:00 local goes out at once. Left out, the
// default defers it.
func TestQuietHoursSwitchedOff(t *testing.T) {
	t.Parallel()
	s := quietStack(t)
	zone := zoneAt23(t)
	toks := seedZoned(t, s, 1, "qo-", []string{zone, zone})

	def := submit(t, s, map[string]any{"title": "t", "body": "default", "audience": map[string]any{"all": true}})
	if def.Class != "bulk" || def.Targeted != 2 || def.Deferred == nil || *def.Deferred != 2 || waiting(def) != 2 || def.QuietHours == nil {
		t.Fatalf("quiet_hours left out: %+v (want bulk, deferred 2, waiting 2, the default quiet hours)", def)
	}
	s.Do("POST", fmt.Sprintf("/push/broadcasts/%d/cancel", def.ID), nil, nil)
	if c := s.WaitFinished(def.ID, 10*time.Second); c.Status != "canceled" || c.Canceled != 2 || c.Succeeded != 0 {
		t.Fatalf("canceled: %+v (want canceled 2)", c)
	}
	assertNone(t, s, "the default-deferred broadcast", toks)

	for i, off := range []any{nil, false} {
		var b teststack.Broadcast
		resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "body": fmt.Sprintf("off %v", off),
			"audience": map[string]any{"all": true}, "quiet_hours": off}, &b)
		if resp.StatusCode != http.StatusOK || b.Class != "bulk" || b.Status != "completed" || b.Targeted != 2 ||
			b.Succeeded != 2 || b.Failed != 0 || b.QuietHours != nil || b.Deferred != nil {
			t.Fatalf(`"quiet_hours": %v: %d %+v (want 200 completed, succeeded 2, no quiet hours)`, off, resp.StatusCode, b)
		}
		if !accepted(s, toks, int64(i+1)) {
			t.Fatalf(`"quiet_hours": %v: want exactly %d message(s) per token: %+v %+v`, off, i+1, s.Emu.Counts(toks[0]), s.Emu.Counts(toks[1]))
		}
	}
}

// quiet_hours of any other type is a 400 naming it.
func TestQuietHoursWrongType(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	for _, tc := range []struct {
		name  string
		v     any
		field string
	}{
		{"true", true, "quiet_hours"},
		{"a string", "22:00-08:00", "quiet_hours"},
		{"a number", 0, "quiet_hours"},
		{"an array", []string{"22:00", "08:00"}, "quiet_hours"},
		{"a numeric start", map[string]any{"start": 22, "end": "08:00"}, "quiet_hours.start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e teststack.ErrorBody
			resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "audience": map[string]any{"all": true}, "quiet_hours": tc.v}, &e)
			if resp.StatusCode != http.StatusBadRequest || e.Error.Code != "invalid_type" || e.Error.Field != tc.field {
				t.Fatalf("%d %+v, want 400 invalid_type on %s", resp.StatusCode, e, tc.field)
			}
		})
	}
}
