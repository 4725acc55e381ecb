package rules

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"pushfan/model"
)

// CategoryRules are the configured message categories (docs/consent.md):
// List by name (empty: none configured, and a broadcast has none),
// Default the category of a broadcast that names none ("": it must name
// one). The category a named audience's broadcasts are in is its own
// (audience.Entry.Category), read with the audience from the current set.
type CategoryRules struct {
	List    map[string]model.Category
	Default string
}

// category is the category spec is sent in, checked: the request's, else
// its named audience's, else the default. A request naming another
// category than its audience's is refused: the audience was declared for
// one (a marketing list is advertising), and naming service would send
// it past the consent its users gave. nil when no categories are
// configured.
func (r Rules) category(spec Spec) (*model.Category, error) {
	c := r.Categories
	var audience, own string
	if spec.Audience != nil {
		audience = spec.Audience.Name
		if n, ok := r.Named.Load().Get(audience); ok {
			own = n.Category
		}
	}
	if len(c.List) == 0 {
		if spec.Category != "" {
			return nil, fieldError("invalid_value", "category", "no categories are configured (categories: in the YAML), so category cannot be %q", spec.Category)
		}
		return nil, nil
	}
	name := spec.Category
	switch {
	case name != "" && own != "" && name != own:
		return nil, fieldError("invalid_value", "category", "audience %q sends in category %q; leave category out or name %q", audience, own, own)
	case name == "" && own != "":
		name = own
	case name == "":
		name = c.Default
	}
	if name == "" {
		return nil, fieldError("missing_field", "category", "category is required: name one of %s (no default_category is configured)", strings.Join(slices.Sorted(maps.Keys(c.List)), ", "))
	}
	cat, ok := c.List[name]
	if !ok {
		return nil, fieldError("invalid_value", "category", "%q is not a category; the categories are %s", name, strings.Join(slices.Sorted(maps.Keys(c.List)), ", "))
	}
	return &cat, nil
}

// CategoryOf is the category a request naming category (may be "") to the
// named audience audience ("" for a built-in one) is sent in, checked as
// Validate checks it: what a preview counts the consent of.
func (r Rules) CategoryOf(category, audience string) (*model.Category, error) {
	return r.category(Spec{Category: category, Audience: &AudienceSpec{Name: audience}})
}

// labeled is spec with cat's title prefix and body suffix on every title
// and body a phone shows: the message, each language of it, each A/B
// variant. The prefix goes at the start of what is shown: the title, or
// the body of a message without one; the suffix after the body (the
// body, when there is none). A message with neither title nor body (data
// only, which the app would show its own way) is refused: its label could
// not be seen to. A label already there is not added twice. A title that
// is a template gets the label as a template literal ({{"(광고) "}}), so
// it is added after the template runs, never read as one; a title that is
// not stays plain text (one message for everyone). Platform overrides
// that would replace a labeled title or body on a device are refused: the
// label must be on what the phone shows.
func labeled(spec Spec, cat *model.Category) (Spec, error) {
	if cat == nil || (cat.TitlePrefix == "" && cat.BodySuffix == "") {
		return spec, nil
	}
	l := label{cat.TitlePrefix, cat.BodySuffix}
	if err := unlabeledOverrides(spec.Android, spec.APNS, spec.Webpush, "", cat); err != nil {
		return spec, err
	}
	if len(spec.Variants) == 0 {
		if spec.Title == "" && spec.Body == "" {
			return spec, fieldError("missing_field", "title", "category %q labels every message (%q, %q): give it a title or a body to carry the label", cat.Name, l.prefix, l.suffix)
		}
		spec.Title, spec.Body = l.pair(spec.Title, spec.Body)
		spec.Localized = l.localized(spec.Localized)
		return spec, nil
	}
	vs := make([]VariantSpec, len(spec.Variants))
	for i, v := range spec.Variants {
		at := "variants[" + strconv.Itoa(i) + "]."
		if err := unlabeledOverrides(v.Android, v.APNS, v.Webpush, at, cat); err != nil {
			return spec, err
		}
		if v.Title == "" && v.Body == "" {
			return spec, fieldError("missing_field", at+"title", "category %q labels every message (%q, %q): give the variant a title or a body to carry the label", cat.Name, l.prefix, l.suffix)
		}
		v.Title, v.Body = l.pair(v.Title, v.Body)
		v.Localized = l.localized(v.Localized)
		vs[i] = v
	}
	spec.Variants = vs
	return spec, nil
}

// label is a category's title prefix and body suffix.
type label struct{ prefix, suffix string }

// pair labels one title and body (see labeled); both empty stay so (a
// language's text left empty on purpose).
func (l label) pair(title, body string) (string, string) {
	if title == "" && body == "" {
		return title, body
	}
	if title != "" {
		title = prefixed(title, l.prefix)
	} else {
		body = prefixed(body, strings.TrimLeft(l.prefix, " "))
	}
	return title, suffixed(body, l.suffix)
}

func (l label) localized(in map[string]model.Localized) map[string]model.Localized {
	if len(in) == 0 {
		return in
	}
	out := make(map[string]model.Localized, len(in))
	for tag, m := range in {
		t, b := l.pair(m.Title, m.Body)
		out[tag] = model.Localized{Title: t, Body: b}
	}
	return out
}

// prefixed is text with prefix p before it (see labeled).
func prefixed(text, p string) string {
	bare := strings.TrimSpace(p)
	lit := "{{" + strconv.Quote(p) + "}}"
	switch {
	case bare == "" || strings.HasPrefix(text, bare) || strings.HasPrefix(text, lit):
		return text
	case strings.Contains(text, "{{"):
		return lit + text
	}
	return p + text
}

// suffixed is body with suffix s after it, or s alone (without its
// leading line breaks and spaces) as the body of a message without one
// (see labeled).
func suffixed(body, s string) string {
	bare := strings.TrimLeft(s, "\n\r\t ")
	lit := "{{" + strconv.Quote(s) + "}}"
	switch {
	case bare == "" || strings.HasSuffix(body, bare) || strings.HasSuffix(body, lit):
		return body
	case body == "":
		return bare
	case strings.Contains(body, "{{"):
		return body + lit
	}
	return body + s
}

// labelPaths are the platform overrides' fields that replace the title or
// the body a device shows, by block: a category's label cannot be added to
// them (a localization key is resolved on the device).
var labelPaths = map[string][][]string{
	"android": {{"notification", "title"}, {"notification", "body"}, {"notification", "title_loc_key"}, {"notification", "body_loc_key"}},
	"apns":    {{"payload", "aps", "alert"}},
	"webpush": {{"notification", "title"}, {"notification", "body"}},
}

// unlabeledOverrides refuses a platform override that would show a title
// or body without cat's label, naming its path (prefix: a variant's).
func unlabeledOverrides(android, apns, webpush json.RawMessage, prefix string, cat *model.Category) error {
	for _, b := range []struct {
		name string
		raw  json.RawMessage
	}{{"android", android}, {"apns", apns}, {"webpush", webpush}} {
		if len(b.raw) == 0 {
			continue
		}
		var v map[string]any
		if json.Unmarshal(b.raw, &v) != nil {
			continue // not an object: the override rules say so with their own error
		}
		for _, path := range labelPaths[b.name] {
			if has(v, path) {
				return fieldError("invalid_value", prefix+b.name+"."+strings.Join(path, "."),
					"category %q labels every title and body (%q, %q): set them at the top level or in localized, where the label is added, not in a platform override", cat.Name, cat.TitlePrefix, cat.BodySuffix)
			}
		}
	}
	return nil
}

func has(v map[string]any, path []string) bool {
	for i, k := range path {
		x, ok := v[k]
		if !ok || x == nil {
			return false
		}
		if i == len(path)-1 {
			return true
		}
		if v, ok = x.(map[string]any); !ok {
			return false
		}
	}
	return false
}
