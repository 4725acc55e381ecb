package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pushfan/model"
)

// loadCategoriesYAML loads the environment's defaults with the YAML file yaml.
func loadCategoriesYAML(t *testing.T, yaml string) (Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(env(with(map[string]string{"PUSHFAN_CONFIG": path})))
}

// The example loads as written, into the rules broadcasts run
// under.
func TestCategoriesLoad(t *testing.T) {
	cfg, err := loadCategoriesYAML(t, `frequency_caps:
  marketing: "1/day"
categories:
  - name: advertising
    consent: table
    night:
      window: "21:00-08:00"
      consent: table
    title_prefix: "(광고) "
    body_suffix: "\n수신거부: 앱 설정 > 알림"
    frequency_cap: marketing
    quiet_hours: "22:00-07:00"
  - name: service
default_category: service
audiences:
  - name: shoppers
    sql: "SELECT 1"
    category: advertising
`)
	if err != nil {
		t.Fatal(err)
	}
	list := cfg.CategoryList()
	if len(list) != 2 || cfg.DefaultCategory != "service" || cfg.Audiences[0].Category != "advertising" {
		t.Fatalf("%+v, default %q", list, cfg.DefaultCategory)
	}
	ad := list[0]
	if ad.Consent != model.ConsentTable || ad.Night == nil || ad.Night.Window != (model.QuietHours{Start: "21:00", End: "08:00"}) ||
		ad.Night.Consent != model.ConsentTable || ad.TitlePrefix != "(광고) " || ad.BodySuffix != "\n수신거부: 앱 설정 > 알림" ||
		ad.FrequencyCap != "marketing" || ad.QuietHours == nil || ad.QuietHours.End != "07:00" {
		t.Fatalf("advertising: %+v", ad)
	}
	if list[1].NeedsConsent() || list[1].Night != nil {
		t.Fatalf("service: %+v", list[1])
	}
}

// Every mistake names its key.
func TestCategoriesAreValidated(t *testing.T) {
	_, err := loadCategoriesYAML(t, `categories:
  - name: Advertising
  - name: promo
    consent: "u.ad = 1; DROP TABLE users"
    night: {window: "25:00-08:00", consent: table}
    title_prefix: "{{.x}}"
    frequency_cap: nosuch
    quiet_hours: "soon"
  - name: promo
  - name: alerts
    night: {window: "21:00-08:00", consent: "u.night = 1"}
  - name: mixed
    consent: "u.ad = 1"
    night: {window: "21:00-08:00", consent: table}
  - name: hidden
    consent: "u.ad = 1 -- and more"
default_category: nosuch
jobs:
  - name: digest
    schedule: "0 9 * * *"
    audience: {all: true}
    message: {title: x}
    category: nope
`)
	for _, key := range []string{
		"categories.0.name", "categories.promo.consent", "categories.promo.night.window", "categories.promo.title_prefix",
		"categories.promo.frequency_cap", "categories.promo.quiet_hours", `categories.promo.name: "promo" is configured twice`,
		"categories.alerts.night.consent", "categories.mixed.night.consent", "categories.hidden.consent",
		"default_category", "jobs.digest.category",
	} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("want %s named, got %v", key, err)
		}
	}
	if _, err := loadCategoriesYAML(t, "default_category: service\n"); err == nil || !strings.Contains(err.Error(), "default_category") {
		t.Fatalf("a default without categories: %v", err)
	}
}
