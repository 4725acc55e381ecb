package console_test

import (
	"encoding/json"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"pushfan/console"
)

// The console's catalogs: one per language, the same keys in each.
var languages = []string{"en", "ko"}

// catalogMessage is a string, or plural forms {"one": ..., "other": ...}.
type catalogMessage struct {
	forms map[string]string
}

func (m *catalogMessage) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		m.forms = map[string]string{"other": s}
		return nil
	}
	return json.Unmarshal(b, &m.forms)
}

func loadCatalog(t *testing.T, lang string) map[string]catalogMessage {
	t.Helper()
	raw, err := fs.ReadFile(console.Assets(), "i18n/"+lang+".json")
	if err != nil {
		t.Fatalf("the %s catalog: %v", lang, err)
	}
	var c map[string]catalogMessage
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("the %s catalog is not a JSON object of strings or plural forms: %v", lang, err)
	}
	// One canonical form (sorted keys, two-space indent, as json.dump(...,
	// indent=2, sort_keys=True, ensure_ascii=False) writes it): keys added by
	// two changes land in different places and merge without a conflict.
	var plain map[string]any
	_ = json.Unmarshal(raw, &plain)
	canon, _ := json.MarshalIndent(plain, "", "  ")
	canon = append(canon, '\n')
	if string(unescapeHTML(canon)) != string(raw) {
		t.Errorf("i18n/%s.json is not in its canonical form (keys sorted, indent 2, a newline at the end): "+
			"python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); open(sys.argv[1],\"w\").write(json.dumps(d, indent=2, sort_keys=True, ensure_ascii=False)+\"\\n\")' console/assets/i18n/%s.json", lang, lang)
	}
	return c
}

// json.MarshalIndent escapes <, > and & for HTML; the catalogs keep them.
func unescapeHTML(b []byte) []byte {
	r := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&")
	return []byte(r.Replace(string(b)))
}

var placeholder = regexp.MustCompile(`\{(\w+)\}`)

func placeholders(m catalogMessage) []string {
	var names []string
	for _, form := range m.forms {
		for _, p := range placeholder.FindAllStringSubmatch(form, -1) {
			names = append(names, p[1])
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// A key the code names literally: t('key') or t("key").
var literalKey = regexp.MustCompile("\\bt\\(\\s*['\"]([a-zA-Z0-9_.-]+)['\"]")

// A key the code builds: t(`code.${c}`) (or tOr(`code.${c}`, c), which
// falls back to the API's value) names every key under "code.".
var builtKey = regexp.MustCompile("\\b(?:t|tOr)\\(\\s*`([a-zA-Z0-9_.-]+)\\$\\{")

// TestCatalogsMatch: every language holds every key, with the same
// placeholders and no empty text; every key the JavaScript names is in the
// catalogs, and every catalog key is named (or built) by some module, so a
// missing or dead string fails here rather than on a screen.
func TestCatalogsMatch(t *testing.T) {
	cats := map[string]map[string]catalogMessage{}
	for _, lang := range languages {
		cats[lang] = loadCatalog(t, lang)
	}
	en := cats["en"]
	for _, lang := range languages {
		for key, msg := range cats[lang] {
			other := "en"
			if lang == "en" {
				other = "ko"
			}
			peer, ok := cats[other][key]
			if !ok {
				t.Errorf("%q is in the %s catalog but not in %s", key, lang, other)
				continue
			}
			if lang == "en" && !slices.Equal(placeholders(msg), placeholders(peer)) {
				t.Errorf("%q: en has placeholders %v, %s has %v", key, placeholders(msg), other, placeholders(peer))
			}
			for form, text := range msg.forms {
				if strings.TrimSpace(text) == "" {
					t.Errorf("%q (%s, %s) is empty", key, lang, form)
				}
			}
			if _, ok := msg.forms["other"]; !ok {
				t.Errorf("%q (%s) has no \"other\" form", key, lang)
			}
		}
	}

	named := map[string]bool{}
	var prefixes []string
	err := fs.WalkDir(console.Assets(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".js") {
			return err
		}
		src, err := fs.ReadFile(console.Assets(), path)
		if err != nil {
			return err
		}
		for _, m := range literalKey.FindAllStringSubmatch(string(src), -1) {
			named[m[1]] = true
			if _, ok := en[m[1]]; !ok {
				t.Errorf("%s names %q, which the catalogs do not hold", path, m[1])
			}
		}
		for _, m := range builtKey.FindAllStringSubmatch(string(src), -1) {
			prefixes = append(prefixes, m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range slices.Sorted(maps.Keys(en)) {
		if named[key] || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(key, p) }) {
			continue
		}
		t.Errorf("%q is in the catalogs but no module names it", key)
	}
}
