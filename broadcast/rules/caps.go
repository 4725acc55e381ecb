package rules

import (
	"pushfan/caps"
	"pushfan/model"
	"pushfan/repository"
)

// CapRules are the deployment's frequency caps (package caps), in the
// canonical form caps.Parse reads: Default is PUSHFAN_FREQUENCY_CAP ("":
// none); Named are the YAML's frequency_caps by name; Jobs name the cap
// of a cron job's broadcasts ("off": none; absent or "default": Default).
// A named audience's cap is its own (audience.Entry.FrequencyCap), read
// with the audience from the current set.
type CapRules struct {
	Default string
	Named   map[string]string
	Jobs    map[string]string
}

// Cap names a CapRules entry may take besides Named's.
const (
	capOff     = "off"
	capDefault = "default"
)

// CapChoice is the frequency cap a broadcast would be sent under, and
// why: what the console shows beside a preview ("Cap 1/day (named:
// marketing)").
type CapChoice struct {
	// Spec is the caps in canonical form ("": none).
	Spec string
	// Source says where Spec comes from: CapNamed (Name is the
	// frequency_caps entry), CapDefault (PUSHFAN_FREQUENCY_CAP), or why
	// none applies: CapOff (the audience's or job's configuration),
	// CapBypass (the request's "frequency_cap": false), CapTransactional
	// (exempt), CapDryRun, CapNone (no cap configured).
	Source string
	Name   string
}

// CapChoice sources.
const (
	CapNamed         = "named"
	CapDefault       = "default"
	CapOff           = "off"
	CapBypass        = "bypass"
	CapTransactional = "transactional"
	CapDryRun        = "dry_run"
	CapNone          = "none"
)

// choice is the cap named name ("" and default: Default; off: none).
func (c CapRules) choice(name string) CapChoice {
	switch name {
	case "", capDefault:
		if c.Default == "" {
			return CapChoice{Source: CapNone}
		}
		return CapChoice{Spec: c.Default, Source: CapDefault}
	case capOff:
		return CapChoice{Source: CapOff}
	}
	return CapChoice{Spec: c.Named[name], Source: CapNamed, Name: name}
}

// frequencyCap is the caps a request is sent under, recorded on its
// broadcast (see CapChoice).
func (r Rules) frequencyCap(spec Spec, a model.Audience, class string) string {
	return r.CapChoice(spec, a, class).Spec
}

// CapChoice is the cap a request is sent under: none when the request
// says "frequency_cap": false (an alert that must go out), for a dry run
// (nothing reaches a user), and for a transactional one unless it says
// "frequency_cap": true (a password reset is not marketing); else the
// job's cap, the named audience's, the category's, or the deployment's.
func (r Rules) CapChoice(spec Spec, a model.Audience, class string) CapChoice {
	switch {
	case spec.FrequencyCap != nil && !*spec.FrequencyCap:
		return CapChoice{Source: CapBypass}
	case spec.DryRun:
		return CapChoice{Source: CapDryRun}
	case class == model.ClassTransactional && spec.FrequencyCap == nil:
		return CapChoice{Source: CapTransactional}
	}
	if name, ok := r.Caps.Jobs[spec.job]; ok && spec.job != "" {
		return r.Caps.choice(name)
	}
	if n, ok := r.Named.Load().Get(a.Name); ok && n.FrequencyCap != "" {
		return r.Caps.choice(n.FrequencyCap)
	}
	if cat, err := r.category(spec); err == nil && cat != nil && cat.FrequencyCap != "" {
		return r.Caps.choice(cat.FrequencyCap)
	}
	return r.Caps.choice(capDefault)
}

// CapWindows are the ledger's keys of the caps spec names (nil: none), as
// app's sends count them (caps.Set.ForApp).
func CapWindows(spec, app string) ([]repository.CapWindow, error) {
	if spec == "" {
		return nil, nil
	}
	set, err := caps.Parse(spec)
	if err != nil {
		return nil, err
	}
	ws := set.ForApp(app).Windows()
	windows := make([]repository.CapWindow, len(ws))
	for i, w := range ws {
		windows[i] = repository.CapWindow{Key: w.Key, Max: w.Max}
	}
	return windows, nil
}
