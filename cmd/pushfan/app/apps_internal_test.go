package app

import (
	"testing"

	"pushfan/config"
)

// The instance's ceiling of sends in flight is shared by its apps in
// proportion to their rate limits: never more in all than the one
// PUSHFAN_CONCURRENCY (but for the smallest pools' floor), and all of it
// for a single app.
func TestAppsShareTheInstancesCeiling(t *testing.T) {
	three := []config.App{{Name: "consumer", RateLimit: 4000}, {Name: "partner", RateLimit: 3000}, {Name: "whitelabel", RateLimit: 2000}}
	cases := []struct {
		name  string
		total int
		apps  []config.App
		want  []int
	}{
		{"one app", 4096, three[:1], []int{4096}},
		{"three apps by their quotas", 4096, three, []int{1820, 1365, 910}},
		{"a tiny app gets the floor", 4096, []config.App{{Name: "big", RateLimit: 9900}, {Name: "tiny", RateLimit: 1}}, []int{4095, 16}},
		{"a ceiling under the floor", 8, three, []int{8, 8, 8}},
		{"no rates: equal shares", 300, []config.App{{Name: "a"}, {Name: "b"}, {Name: "c"}}, []int{100, 100, 100}},
	}
	for _, c := range cases {
		sum := 0
		for i, a := range c.apps {
			got := appConcurrency(c.total, a.RateLimit, c.apps)
			if got != c.want[i] {
				t.Errorf("%s: %s's ceiling %d, want %d", c.name, a.Name, got, c.want[i])
			}
			sum += got
		}
		if c.name != "a tiny app gets the floor" && c.name != "a ceiling under the floor" && sum > c.total {
			t.Errorf("%s: the apps' ceilings add up to %d, over the instance's %d", c.name, sum, c.total)
		}
	}
}
