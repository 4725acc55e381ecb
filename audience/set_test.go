package audience_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"pushfan/audience"
)

const pageSQL = "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after ORDER BY t.id LIMIT :limit"

func set(t *testing.T, defs ...audience.Definition) *audience.Set {
	t.Helper()
	auds, err := audience.Compile(defs)
	if err != nil {
		t.Fatal(err)
	}
	return audience.NewSet(auds, defs, func(app string) string {
		if app == "" {
			return "default"
		}
		return app
	}, time.Now())
}

// The catalog hands out whole sets: a reader holds the set it loaded
// while a swap puts another in, and the nil and empty catalogs hold none.
func TestCatalogSwapsWholeSets(t *testing.T) {
	var none *audience.Catalog
	if _, ok := none.Load().Get("vip"); ok || len(none.Load().Names()) != 0 {
		t.Fatal("a nil catalog holds audiences")
	}
	one := set(t, audience.Definition{Name: "vip", SQL: pageSQL, FrequencyCap: "marketing", Category: "ads"})
	c := audience.NewCatalog(one)
	held := c.Load()
	vip, ok := held.Get("vip")
	if !ok || vip.App != "default" || vip.FrequencyCap != "marketing" || vip.Category != "ads" {
		t.Fatalf("vip: %+v, %v", vip, ok)
	}
	two := set(t, audience.Definition{Name: "lapsed", SQL: pageSQL, App: "shop"})
	if old := c.Swap(two); old != one {
		t.Fatal("Swap did not return the set it replaced")
	}
	if _, ok := held.Get("vip"); !ok {
		t.Fatal("a set loaded before the swap changed")
	}
	if got := c.Load().Names(); !slices.Equal(got, []string{"lapsed"}) {
		t.Fatalf("names after the swap: %v", got)
	}
	if l, _ := c.Load().Get("lapsed"); l.App != "shop" {
		t.Fatalf("lapsed's app: %q", l.App)
	}
	// Readers and swaps at once (run with -race): every load is one of
	// the two sets, whole.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				s := c.Load()
				_, v := s.Get("vip")
				_, l := s.Get("lapsed")
				if v == l {
					t.Errorf("a load saw both sets or neither: vip %v, lapsed %v", v, l)
					return
				}
			}
		}()
	}
	for j := 0; j < 1000; j++ {
		if j%2 == 0 {
			c.Swap(one)
		} else {
			c.Swap(two)
		}
	}
	wg.Wait()
}

// Diff names what a reload added, removed and changed.
func TestSetDiff(t *testing.T) {
	old := set(t, audience.Definition{Name: "a", SQL: pageSQL}, audience.Definition{Name: "b", SQL: pageSQL},
		audience.Definition{Name: "c", SQL: pageSQL, FrequencyCap: "off"})
	now := set(t, audience.Definition{Name: "a", SQL: pageSQL}, audience.Definition{Name: "c", SQL: pageSQL},
		audience.Definition{Name: "d", SQL: pageSQL})
	d := now.Diff(old)
	if !slices.Equal(d.Added, []string{"d"}) || !slices.Equal(d.Removed, []string{"b"}) || !slices.Equal(d.Changed, []string{"c"}) {
		t.Fatalf("diff: %+v", d)
	}
	if d := now.Diff(nil); len(d.Added) != 3 || len(d.Removed) != 0 {
		t.Fatalf("diff from nothing: %+v", d)
	}
}
