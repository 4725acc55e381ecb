package fcmemu_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"firebase.google.com/go/v4/messaging"

	"pushfan/fcmemu"
)

// sendTo sends n messages to token through the SDK: number i has title
// "m<i>", and the collapse key and ttl that key and ttl give it.
func sendTo(t *testing.T, c *messaging.Client, token string, n int, key func(i int) string, ttl *time.Duration) {
	t.Helper()
	for i := range n {
		m := msg(token)
		m.Notification.Title = fmt.Sprintf("m%d", i)
		m.Android = &messaging.AndroidConfig{CollapseKey: key(i), TTL: ttl}
		if _, err := c.Send(context.Background(), m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

func titles(got []fcmemu.Delivered) []string {
	out := make([]string, len(got))
	for i, m := range got {
		out[i] = m.Title
	}
	return out
}

// An offline phone gets every non-collapsible message when it returns,
// but only four collapse keys' latest: FCM keeps at most four keys.
func TestAnOfflinePhoneKeepsFourCollapseKeys(t *testing.T) {
	e, ts := startEmu(t, fcmemu.Config{})
	c := sdkClient(t, ts.URL)
	none := func(int) string { return "" }

	e.Offline("phone-a")
	sendTo(t, c, "phone-a", 6, none, nil)
	got, deleted := e.Online("phone-a")
	if want := []string{"m0", "m1", "m2", "m3", "m4", "m5"}; fmt.Sprint(titles(got)) != fmt.Sprint(want) || deleted {
		t.Fatalf("six non-collapsible: got %v (deleted %v), want %v", titles(got), deleted, want)
	}

	e.Offline("phone-b")
	sendTo(t, c, "phone-b", 6, func(i int) string { return fmt.Sprintf("key-%d", i) }, nil)
	got, _ = e.Online("phone-b")
	if want := []string{"m2", "m3", "m4", "m5"}; fmt.Sprint(titles(got)) != fmt.Sprint(want) {
		t.Fatalf("six collapse keys: got %v, want the last four %v", titles(got), want)
	}

	e.Offline("phone-c")
	sendTo(t, c, "phone-c", 3, func(int) string { return "news" }, nil)
	got, _ = e.Online("phone-c")
	if want := []string{"m2"}; fmt.Sprint(titles(got)) != fmt.Sprint(want) {
		t.Fatalf("one collapse key three times: got %v, want the latest %v", titles(got), want)
	}

	// Online, a phone gets each message at once.
	sendTo(t, c, "phone-c", 2, func(int) string { return "news" }, nil)
	if got := e.Received("phone-c"); len(got) != 3 {
		t.Fatalf("phone-c received %v, want m2 then two more", titles(got))
	}
}

// Over 100 stored non-collapsible messages FCM discards them all and the
// phone is told; a ttl of 0 is never stored, and a passed ttl is dropped.
func TestAnOfflinePhonesStoreOverflowsAndExpires(t *testing.T) {
	e, ts := startEmu(t, fcmemu.Config{})
	c := sdkClient(t, ts.URL)
	none := func(int) string { return "" }

	e.Offline("phone-d")
	sendTo(t, c, "phone-d", 101, none, nil)
	if got, deleted := e.Online("phone-d"); len(got) != 0 || !deleted {
		t.Fatalf("101 stored: got %d, deleted %v; want none, deleted", len(got), deleted)
	}

	zero, short := time.Duration(0), 50*time.Millisecond
	e.Offline("phone-e")
	sendTo(t, c, "phone-e", 1, none, &zero)
	sendTo(t, c, "phone-e", 1, none, &short)
	time.Sleep(2 * short) // past the second one's lifetime
	if got, _ := e.Online("phone-e"); len(got) != 0 {
		t.Fatalf("ttl 0 and a passed ttl: got %v, want none", titles(got))
	}
}
