package message

import (
	"testing"

	"pushfan/model"
)

func TestLocaleMatcherPicksExactThenBaseThenDefault(t *testing.T) {
	m := newLocaleMatcher(map[string]model.Localized{
		"ko": {Title: "k"}, "pt-BR": {Title: "pb"}, "pt": {Title: "p"}, "zh_Hant": {Title: "zh"},
	})
	// names: the keys sorted, then "default".
	want := func(name string) int {
		for i, n := range m.names {
			if n == name {
				return i
			}
		}
		t.Fatalf("no variant %q in %v", name, m.names)
		return -1
	}
	for locale, variant := range map[string]string{
		"ko": "ko", "KO": "ko", "ko-KR": "ko", "ko_kr": "ko", " ko ": "ko",
		"pt-BR": "pt-BR", "pt_br": "pt-BR", "PT-br": "pt-BR",
		"pt": "pt", "pt-PT": "pt", "pt-BR-x-test": "pt-BR",
		"zh-Hant-TW": "zh_Hant", "zh": model.VariantDefault,
		"de": model.VariantDefault, "": model.VariantDefault, "en": model.VariantDefault, "k": model.VariantDefault,
	} {
		if got := m.pick(locale); got != want(variant) {
			t.Errorf("locale %q picked %q, want %q", locale, m.names[got], variant)
		}
	}
	if newLocaleMatcher(nil) != nil {
		t.Fatal("a message without variants needs no matcher")
	}
}
