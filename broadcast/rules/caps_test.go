package rules

import (
	"testing"

	"pushfan/audience"
	"pushfan/model"
)

// The caps a request is sent under: the deployment's by default, a job's
// or named audience's where the configuration names one, none for a
// bypass, a dry run or a transactional broadcast (unless it asks).
func TestFrequencyCapRules(t *testing.T) {
	r := Rules{Caps: CapRules{
		Default: "3/day",
		Named:   map[string]string{"marketing": "1/2h0m0s,1/day"},
		Jobs:    map[string]string{"digest": "marketing", "plain": "default"},
	}, Named: namedSet(t, audience.Definition{Name: "lapsed", FrequencyCap: "marketing"}, audience.Definition{Name: "vip", FrequencyCap: "off"},
		audience.Definition{Name: "other"})}
	all := model.Audience{All: true}
	for _, tc := range []struct {
		name  string
		spec  Spec
		a     model.Audience
		class string
		want  string
	}{
		{"the default", Spec{}, all, model.ClassBulk, "3/day"},
		{"a bypass", Spec{FrequencyCap: ptr(false)}, all, model.ClassBulk, ""},
		{"a dry run", Spec{DryRun: true}, all, model.ClassBulk, ""},
		{"transactional", Spec{}, all, model.ClassTransactional, ""},
		{"transactional asking for the cap", Spec{FrequencyCap: ptr(true)}, all, model.ClassTransactional, "3/day"},
		{"a named audience's cap", Spec{}, model.Audience{Name: "lapsed"}, model.ClassBulk, "1/2h0m0s,1/day"},
		{"a named audience without a cap of its own", Spec{}, model.Audience{Name: "other"}, model.ClassBulk, "3/day"},
		{"a named audience off", Spec{}, model.Audience{Name: "vip"}, model.ClassBulk, ""},
		{"a job's cap over its audience's", Spec{job: "digest"}, model.Audience{Name: "vip"}, model.ClassBulk, "1/2h0m0s,1/day"},
		{"a job on the default", Spec{job: "plain"}, all, model.ClassBulk, "3/day"},
		{"a job's bypass", Spec{job: "digest", FrequencyCap: ptr(false)}, all, model.ClassBulk, ""},
	} {
		if got := r.frequencyCap(tc.spec, tc.a, tc.class); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
