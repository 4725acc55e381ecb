package config

import (
	"strings"
	"testing"
	"time"

	"pushfan/model"
)

// The delivery defaults: bulk at normal and 5 for 4 weeks, transactional
// at high and 10 for a day; the environment sets each, the YAML's
// delivery: too, and an app's own replaces the fields it sets.
func TestDeliveryDefaultsByClassAndApp(t *testing.T) {
	cfg, err := loadAppsYAML(t, `delivery:
  transactional: {ttl: 2h}
apps:
  - {name: consumer, project_id: acme-consumer}
  - name: partner
    project_id: acme-partner
    delivery: {bulk: {android_priority: high}, transactional: {apns_priority: "5"}}
`, map[string]string{"PUSHFAN_BULK_TTL": "72h"})
	if err != nil {
		t.Fatal(err)
	}
	apps := cfg.AppList()
	want := model.DeliveryDefaults{
		Bulk:          model.DeliveryClass{AndroidPriority: "normal", APNSPriority: "5", TTL: 72 * time.Hour},
		Transactional: model.DeliveryClass{AndroidPriority: "high", APNSPriority: "10", TTL: 2 * time.Hour},
	}
	if got := cfg.DeliveryOf(apps[0]); got != want {
		t.Fatalf("consumer's delivery %+v, want %+v", got, want)
	}
	want.Bulk.AndroidPriority, want.Transactional.APNSPriority = "high", "5"
	if got := cfg.DeliveryOf(apps[1]); got != want {
		t.Fatalf("partner's delivery %+v, want %+v", got, want)
	}
	if got := Defaults().Delivery; got.Bulk.TTL != 28*24*time.Hour || got.Transactional.AndroidPriority != "high" || got.Bulk.AndroidPriority != "normal" {
		t.Fatalf("defaults %+v", got)
	}
}

// A bad delivery setting is refused at start, naming it.
func TestDeliveryDefaultsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		yaml string
		want string
	}{
		{map[string]string{"PUSHFAN_BULK_ANDROID_PRIORITY": "urgent"}, "", "PUSHFAN_BULK_ANDROID_PRIORITY"},
		{map[string]string{"PUSHFAN_TRANSACTIONAL_APNS_PRIORITY": "7"}, "", "PUSHFAN_TRANSACTIONAL_APNS_PRIORITY"},
		{map[string]string{"PUSHFAN_BULK_TTL": "700h"}, "", "PUSHFAN_BULK_TTL"},
		{map[string]string{"PUSHFAN_TRANSACTIONAL_TTL": "1.5s"}, "", "PUSHFAN_TRANSACTIONAL_TTL"},
		{nil, "apps:\n  - {name: a, project_id: p, delivery: {bulk: {android_priority: HIGHEST}}}\n", "apps.a.delivery.bulk.android_priority"},
		{nil, "apps:\n  - {name: a, project_id: p, delivery: {transactional: {ttl: 800h}}}\n", "apps.a.delivery.transactional.ttl"},
	} {
		var err error
		if tc.yaml != "" {
			_, err = loadAppsYAML(t, tc.yaml, tc.env)
		} else {
			_, err = Load(env(with(tc.env)))
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %q: %v, want an error naming %s", tc.env, tc.yaml, err, tc.want)
		}
	}
}
