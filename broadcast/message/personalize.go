package message

import (
	"fmt"

	"pushfan/audience"
	"pushfan/fanout"
	"pushfan/model"
)

// Personalizer renders templated messages per target; nil when the
// message has no template action (one message serves everyone, or one per
// language: the Variants, prepared once each). A localized message's
// Variants pick and count each target's language either way.
func Personalizer(b *model.Broadcast, base *fanout.Message) (fanout.Personalizer, *fanout.Variants, error) {
	m := b.Message
	tmpl, err := audience.ParseTemplate(m.Title, m.Body, m.Data, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("message template: %w", err)
	}
	plat, err := newPlatformTemplate(m)
	if err != nil {
		return nil, nil, err
	}
	loc := newLocaleMatcher(m.Localized)
	if loc == nil {
		if tmpl.IsStatic() && plat == nil {
			return nil, nil, nil
		}
		return render(tmpl, base, nil, nil, plat), nil, nil
	}
	// One template per variant, the default last (as in loc.names).
	static := tmpl.IsStatic() && plat == nil
	tmpls := make([]*audience.Template, 0, len(loc.names))
	for _, name := range loc.names[:len(loc.names)-1] {
		l := m.Localized[name]
		t, err := audience.ParseTemplate(l.Title, l.Body, m.Data, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("message template (localized %s): %w", name, err)
		}
		static = static && t.IsStatic()
		tmpls = append(tmpls, t)
	}
	tmpls = append(tmpls, tmpl)
	variants := loc.variants(b, base)
	if static {
		return nil, variants, nil
	}
	return render(nil, base, loc, tmpls, plat), variants, nil
}

// render is the Personalizer of a templated message: tmpl, or with a
// matcher the template of the target's language among tmpls.
func render(tmpl *audience.Template, base *fanout.Message, loc *localeMatcher, tmpls []*audience.Template, plat *platformTemplate) fanout.Personalizer {
	return func(t fanout.Target) (*fanout.Message, error) {
		tmpl := tmpl
		if loc != nil {
			tmpl = tmpls[loc.pick(t.Locale)]
		}
		title, body, data, err := tmpl.Render(t.Vars)
		if err != nil {
			return nil, err
		}
		p := base.Platform
		if plat != nil {
			if p, err = plat.render(t.Vars, base.Platform); err != nil {
				return nil, err
			}
		}
		return &fanout.Message{Title: title, Body: body, Image: base.Image, Data: data, Delivery: base.Delivery, Platform: p, DryRun: base.DryRun}, nil
	}
}
