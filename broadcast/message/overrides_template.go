package message

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"pushfan/audience"
	"pushfan/fanout"
	"pushfan/model"
)

// Tag is broadcast id's display tag (fanout.Delivery.DisplayTag): the
// notification tag on Android and the web, and apns-collapse-id, so that
// a rare duplicate after a kill -9 folds on the device.
func Tag(id uint64) string { return "pushfan-" + strconv.FormatUint(id, 10) }

// platformFields lists every string of the objects that may be a template,
// named by its path.
func platformFields(p [4]override) []audience.Named {
	var named []audience.Named
	for _, o := range p {
		for _, l := range o.leaves {
			named = append(named, audience.Named{Name: l.path.name, Src: l.src})
		}
	}
	return named
}

// checkPlatformTemplates parses the objects' strings as templates over the
// audience's variables, naming the path of the first bad one. A templated
// URL whose host no rendered value could keep is refused first.
func checkPlatformTemplates(p [4]override, vars []string) error {
	if err := checkLinkOrigins(p); err != nil {
		return err
	}
	if _, err := audience.ParseFields(platformFields(p), vars); err != nil {
		var te *audience.TemplateError
		if errors.As(err, &te) {
			return FieldErrorf("template_error", te.Field, "%v", err)
		}
		return FieldErrorf("template_error", "", "%v", err)
	}
	return nil
}

// platformMessage is m with the normalized objects.
func platformMessage(m model.Message, p [4]override) (model.Message, error) {
	raw, err := encodePlatform(p)
	if err != nil {
		return m, err
	}
	m.Android, m.APNS, m.Webpush, m.FCMOptions = raw[0], raw[1], raw[2], raw[3]
	return m, nil
}

// messagePlatform is the engine's form of a stored message's objects.
func messagePlatform(m model.Message) fanout.Platform {
	return fanout.Platform{Android: m.Android, APNS: m.APNS, Webpush: m.Webpush, FCMOptions: m.FCMOptions}
}

// platformTemplate renders the objects' templated strings per target.
type platformTemplate struct {
	objects [4]override
	fields  *audience.Fields
}

// newPlatformTemplate parses a stored message's objects again (the rules
// are idempotent on their own output) for their templates; nil when no
// string in them has an action.
func newPlatformTemplate(m model.Message) (*platformTemplate, error) {
	p, err := parsePlatform([4]json.RawMessage{m.Android, m.APNS, m.Webpush, m.FCMOptions})
	if err != nil {
		return nil, fmt.Errorf("platform overrides: %w", err)
	}
	f, err := audience.ParseFields(platformFields(p), nil)
	if err != nil {
		return nil, fmt.Errorf("platform override template: %w", err)
	}
	if f.IsStatic() {
		return nil, nil
	}
	return &platformTemplate{objects: p, fields: f}, nil
}

// render is the objects for one target's variables. A rendered URL that
// is no longer one, or is on another scheme or host than its template
// fixes, is a *audience.TemplateError naming its path, like any other
// template failure of the target: that target is not sent.
func (t *platformTemplate) render(vars map[string]string, base fanout.Platform) (fanout.Platform, error) {
	values, err := t.fields.Render(vars)
	if err != nil {
		return base, err
	}
	out := [4]json.RawMessage{base.Android, base.APNS, base.Webpush, base.FCMOptions}
	i := 0
	for k, o := range t.objects {
		if len(o.leaves) == 0 {
			continue
		}
		var tree any = o.tree
		for _, l := range o.leaves {
			v := values[i]
			i++
			if v == l.src {
				continue
			}
			if l.link != nil {
				if err := l.link.check(l.path, v); err != nil {
					return base, &audience.TemplateError{Field: l.path.name, Err: err}
				}
			}
			if l.origin != nil {
				if err := l.origin.check(l.path, v); err != nil {
					return base, &audience.TemplateError{Field: l.path.name, Err: err}
				}
			}
			tree = setAt(tree, l.path.keys, v)
		}
		raw, err := json.Marshal(tree)
		if err != nil {
			return base, fmt.Errorf("encoding %s: %w", overrideNames[k], err)
		}
		out[k] = raw
	}
	return fanout.Platform{Android: out[0], APNS: out[1], Webpush: out[2], FCMOptions: out[3]}, nil
}

// setAt returns node with the value at keys replaced by v, copying the
// maps and slices on the way and sharing the rest: node is read by every
// worker at once, so it is never written.
func setAt(node any, keys []any, v string) any {
	if len(keys) == 0 {
		return v
	}
	switch n := node.(type) {
	case map[string]any:
		k := keys[0].(string)
		c := maps.Clone(n)
		c[k] = setAt(n[k], keys[1:], v)
		return c
	case []any:
		i := keys[0].(int)
		c := slices.Clone(n)
		c[i] = setAt(n[i], keys[1:], v)
		return c
	}
	return node // unreachable: leaves are found by walking this tree
}
