package broadcast

import (
	"context"
	"fmt"

	"pushfan/caps"
	"pushfan/model"
	"pushfan/repository"
)

// CapRules are the deployment's frequency caps (package caps), in the
// canonical form caps.Parse reads: Default is PUSHFAN_FREQUENCY_CAP ("":
// none); Named are the YAML's frequency_caps by name; Audiences and Jobs
// name the cap of a named audience's and a cron job's broadcasts ("off":
// none; absent or "default": Default).
type CapRules struct {
	Default   string
	Named     map[string]string
	Audiences map[string]string
	Jobs      map[string]string
}

// Cap names a CapRules entry may take besides Named's.
const (
	capOff     = "off"
	capDefault = "default"
)

// spec is the cap named name ("" and default: Default; off: none).
func (c CapRules) spec(name string) string {
	switch name {
	case "", capDefault:
		return c.Default
	case capOff:
		return ""
	}
	return c.Named[name]
}

// frequencyCap is the caps a request is sent under, recorded on its
// broadcast: none when the request says "frequency_cap": false (an alert
// that must go out), for a dry run (nothing reaches a user), and for a
// transactional one unless it says "frequency_cap": true (a password
// reset is not marketing); else the job's cap, the named audience's, or
// the deployment's.
func (r Rules) frequencyCap(spec Spec, a model.Audience, class string) string {
	if spec.FrequencyCap != nil && !*spec.FrequencyCap || spec.DryRun ||
		class == model.ClassTransactional && spec.FrequencyCap == nil {
		return ""
	}
	if name, ok := r.Caps.Jobs[spec.job]; ok && spec.job != "" {
		return r.Caps.spec(name)
	}
	if name, ok := r.Caps.Audiences[a.Name]; ok && a.Name != "" {
		return r.Caps.spec(name)
	}
	return r.Caps.Default
}

// PreviewCapped counts the users of a built-in audience whom the
// deployment's cap would withhold from a broadcast now (the console's
// "N users would be capped"); nil when no cap applies or the audience is
// a named one (its users are known only by paging it). spec was validated
// by PreviewAudience.
func (s *Service) PreviewCapped(ctx context.Context, app string, spec *AudienceSpec) (*int64, error) {
	in, err := s.appOf(app)
	if err != nil {
		return nil, err
	}
	a, _, err := s.opt.Rules.audience(spec)
	if err != nil || a.Name != "" || s.opt.Rules.Caps.Default == "" {
		return nil, err
	}
	set, err := caps.Parse(s.opt.Rules.Caps.Default)
	if err != nil {
		return nil, err
	}
	ws := set.ForApp(in.Name).Windows()
	windows := make([]repository.CapWindow, len(ws))
	for i, w := range ws {
		windows[i] = repository.CapWindow{Key: w.Key, Max: w.Max}
	}
	ctx, cancel := context.WithTimeout(ctx, 6*s.opt.DBTimeout)
	defer cancel()
	n, err := in.Store.CountCappedUsers(ctx, a, windows, s.now())
	if err != nil {
		return nil, fmt.Errorf("preview: %w", err)
	}
	return &n, nil
}
