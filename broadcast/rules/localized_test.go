package rules

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pushfan/broadcast/message"
	"pushfan/model"
)

func TestLocalizedRules(t *testing.T) {
	all := &AudienceSpec{All: true}
	v := func(title, body string) model.Localized { return model.Localized{Title: title, Body: body} }
	many := map[string]model.Localized{}
	for i := range message.MaxLocales + 1 {
		many[fmt.Sprintf("x%c%c", 'a'+i/26%26, 'a'+i%26)] = v("t", "")
	}
	for _, tc := range []struct {
		name        string
		loc         map[string]model.Localized
		code, field string
	}{
		{"one letter", map[string]model.Localized{"k": v("t", "")}, "invalid_locale", "localized.k"},
		{"digits first", map[string]model.Localized{"12": v("t", "")}, "invalid_locale", "localized.12"},
		{"empty subtag", map[string]model.Localized{"pt-": v("t", "")}, "invalid_locale", "localized.pt-"},
		{"long subtag", map[string]model.Localized{"en-abcdefghi": v("t", "")}, "invalid_locale", "localized.en-abcdefghi"},
		{"space", map[string]model.Localized{"pt BR": v("t", "")}, "invalid_locale", "localized.pt BR"},
		{"too long", map[string]model.Localized{"en" + strings.Repeat("-abcdefgh", 4): v("t", "")}, "invalid_locale", "localized.en" + strings.Repeat("-abcdefgh", 4)},
		{"duplicate", map[string]model.Localized{"pt-BR": v("a", ""), "pt_br": v("b", "")}, "duplicate_locale", "localized.pt_br"},
		{"empty variant", map[string]model.Localized{"ko": v("", "")}, "empty_message", "localized.ko"},
		{"bad utf-8", map[string]model.Localized{"ko": v("ok", "\xff")}, "invalid_value", "localized.ko.body"},
		{"unknown variable", map[string]model.Localized{"ja": v("{{.name}}", "")}, "template_error", "localized.ja.title"},
		{"bad template", map[string]model.Localized{"ja": v("x", "{{")}, "template_error", "localized.ja.body"},
		{"largest too large", map[string]model.Localized{"ko": v("short", ""), "ja": v("t", strings.Repeat("あ", 1400))}, "payload_too_large", "localized.ja"},
		{"too many", many, "too_many_locales", "localized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rules.Validate(Spec{Title: "hi", Audience: all, Localized: tc.loc}, time.Now())
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Code != tc.code || fe.Field != tc.field {
				t.Fatalf("got %v, want %s at %s", err, tc.code, tc.field)
			}
		})
	}
	ok := map[string]model.Localized{"ko": v("안녕", ""), "ja": v("", "こんにちは"), "pt-BR": v("Olá", "corpo"), "zh-Hant-TW": v("你好", "")}
	in, err := rules.Validate(Spec{Title: "hi", Audience: all, Localized: ok}, time.Now())
	if err != nil || len(in.Message.Localized) != len(ok) {
		t.Fatalf("valid variants: %v, %+v", err, in.Message)
	}
}
