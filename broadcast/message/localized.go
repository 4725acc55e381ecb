package message

import (
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"pushfan/audience"
	"pushfan/fanout"
	"pushfan/model"
)

// MaxLocales bounds a message's localized variants: each is prepared and
// counted per run, and a campaign in more languages than this is a
// translation system's job, not one request's.
const MaxLocales = 100

// localeTag is a well-formed BCP 47 tag as far as matching needs: a 2- or
// 3-letter language, then subtags of 1 to 8 letters or digits, separated
// by "-" (or "_", as Android and many user tables write them). At most 35
// characters, the longest tag RFC 5646 asks implementations to handle.
var localeTag = regexp.MustCompile(`^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*$`)

const maxLocaleLen = 35

// ValidateLocalized checks a message's localized variants: well-formed
// distinct tags, a title or body each, valid UTF-8, templates over the
// audience's vars, and FCM's payload limit for each variant (the largest
// one decides). Fields are named localized.<key>[.title|.body].
func ValidateLocalized(localized map[string]model.Localized, image string, data map[string]string, vars []string, platformBytes int) error {
	if len(localized) == 0 {
		return nil
	}
	if len(localized) > MaxLocales {
		return FieldErrorf("too_many_locales", "localized", "localized has %d languages; at most %d are allowed", len(localized), MaxLocales)
	}
	seen := make(map[string]string, len(localized))
	largest, largestKey := 0, ""
	for _, key := range slices.Sorted(maps.Keys(localized)) {
		field := "localized." + key
		if len(key) > maxLocaleLen || !localeTag.MatchString(key) {
			return FieldErrorf("invalid_locale", field, "%q is not a language tag such as \"ko\", \"ja\" or \"pt-BR\" (a 2- or 3-letter language, then subtags of 1-8 letters or digits separated by \"-\")", key)
		}
		norm := normalizeLocale(key)
		if other, dup := seen[norm]; dup {
			return FieldErrorf("duplicate_locale", field, "%q and %q are the same language tag (matching ignores case and treats _ as -)", other, key)
		}
		seen[norm] = key
		v := localized[key]
		if v.Title == "" && v.Body == "" {
			return FieldErrorf("empty_message", field, "the %s variant is empty: set its title or body", key)
		}
		for _, f := range []struct{ name, v string }{{"title", v.Title}, {"body", v.Body}} {
			if !utf8.ValidString(f.v) {
				return FieldErrorf("invalid_value", field+"."+f.name, "%s.%s is not valid UTF-8", field, f.name)
			}
		}
		if _, err := audience.ParseTemplate(v.Title, v.Body, nil, vars); err != nil {
			var te *audience.TemplateError
			if errors.As(err, &te) {
				return FieldErrorf("template_error", field+"."+te.Field, "%v", err)
			}
			return FieldErrorf("template_error", field, "%v", err)
		}
		if n := PayloadSize(v.Title, v.Body, image, data) + platformBytes; n > largest {
			largest, largestKey = n, key
		}
	}
	if largest > MaxPayloadBytes {
		return FieldErrorf("payload_too_large", "localized."+largestKey, "the %s variant's payload is %d bytes; FCM allows at most %d (its title and body with the image, data and platform objects)", largestKey, largest, MaxPayloadBytes)
	}
	return nil
}

// normalizeLocale folds a tag for matching: lower case, "_" as "-",
// surrounding spaces dropped. It allocates only when it changes something
// (user tables mostly hold tags already folded, or a few distinct ones).
func normalizeLocale(s string) string {
	s = strings.TrimSpace(s)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '_' || ('A' <= c && c <= 'Z') {
			return strings.ReplaceAll(strings.ToLower(s), "_", "-")
		}
	}
	return s
}

// localeMatcher picks a target's variant of a localized message by its
// locale: the exact tag first ("pt-br"), then shorter prefixes down to
// the base language ("pt"), as RFC 4647 lookup does; no match is the
// default (the top-level title and body). It is read-only once built, so
// workers may share it.
type localeMatcher struct {
	index map[string]int // normalized tag → index in names
	names []string       // the request's keys, sorted, then model.VariantDefault
}

// newLocaleMatcher returns nil for a message without variants.
func newLocaleMatcher(loc map[string]model.Localized) *localeMatcher {
	if len(loc) == 0 {
		return nil
	}
	m := &localeMatcher{index: make(map[string]int, len(loc)), names: VariantNames(loc)}
	for i, key := range m.names[:len(m.names)-1] {
		m.index[normalizeLocale(key)] = i
	}
	return m
}

// VariantNames are a localized message's variants in the engine's order:
// its languages sorted, then model.VariantDefault; nil when it has none.
// An event token's localized index i (from 1) is VariantNames[i-1].
func VariantNames(loc map[string]model.Localized) []string {
	if len(loc) == 0 {
		return nil
	}
	return append(slices.Sorted(maps.Keys(loc)), model.VariantDefault)
}

// pick is the index in m.names of the variant for locale.
func (m *localeMatcher) pick(locale string) int {
	tag := normalizeLocale(locale)
	for tag != "" {
		if i, ok := m.index[tag]; ok {
			return i
		}
		cut := strings.LastIndexByte(tag, '-')
		if cut < 0 {
			break
		}
		tag = tag[:cut]
	}
	return len(m.names) - 1
}

// variants are the engine's Variants for b's localized message: one
// message per language plus the default (base), each prepared once per run.
func (m *localeMatcher) variants(b *model.Broadcast, base *fanout.Message) *fanout.Variants {
	v := &fanout.Variants{Names: m.names, Pick: func(t fanout.Target) int { return m.pick(t.Locale) }}
	for _, name := range m.names[:len(m.names)-1] {
		l := b.Message.Localized[name]
		msg := *base
		msg.Title, msg.Body = l.Title, l.Body
		v.Messages = append(v.Messages, &msg)
	}
	v.Messages = append(v.Messages, base)
	return v
}
