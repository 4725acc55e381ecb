package ratelimit

import (
	"fmt"
	"testing"
)

// A full limiter map forgets its least recently used key, not every key:
// clearing them all handed every address a fresh budget, so one range of
// many addresses (an IPv6 /48 holds 65536 /64s) reset everyone's.
func TestAFullLimiterMapForgetsTheLeastRecentlyUsedKey(t *testing.T) {
	k := New(1, 1) // one event, then one a minute
	spend := func(key string) bool {
		r := k.Reserve(key)
		if r.Delay() > 0 {
			r.Cancel()
			return false
		}
		return true
	}
	if !spend("victim") {
		t.Fatal("a new key's first event was refused")
	}
	for i := range MaxKeys - 1 {
		if !spend(fmt.Sprint("other-", i)) {
			t.Fatalf("other-%d's first event was refused", i)
		}
	}
	if spend("victim") { // the map is full; this makes the victim the most recent
		t.Fatal("the victim's spent budget came back before the map overflowed")
	}
	if !spend("newcomer") {
		t.Fatal("a new key at a full map was refused")
	}
	if spend("victim") {
		t.Fatal("a new key at a full map reset the victim's spent budget")
	}
	if spend("other-1") {
		t.Fatal("a new key at a full map reset other-1's spent budget")
	}
	if !spend("other-0") { // the least recently used: forgotten, so fresh
		t.Fatal("other-0, the least recently used key, was kept instead")
	}
}
