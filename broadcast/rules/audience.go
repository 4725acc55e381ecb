package rules

import (
	"errors"
	"fmt"
	"regexp"

	"pushfan/audience"
	"pushfan/model"
)

// Audience validates a request's audience and returns it as stored, with
// the template variables its rows carry (none for the built-in audiences).
func (r Rules) Audience(a *AudienceSpec) (model.Audience, []string, error) {
	none := []string{}
	set := 0
	if a != nil {
		for _, b := range []bool{a.All, len(a.UserIDs) > 0, a.Name != "", a.Segment != ""} {
			if b {
				set++
			}
		}
	}
	switch {
	case a == nil:
		return model.Audience{}, nil, fieldError("missing_field", "audience", `audience is required: {"all": true}, {"user_ids": [...]}, {"segment": "..."} or {"name": "...", "params": {...}}`)
	case set > 1:
		return model.Audience{}, nil, fieldError("invalid_value", "audience", "audience must set exactly one of all, user_ids, segment or name")
	case a.Params != nil && a.Name == "":
		return model.Audience{}, nil, fieldError("invalid_value", "audience.params", "params only apply to a named audience")
	case a.Name != "":
		return r.named(a)
	case a.Segment != "":
		if !segmentName.MatchString(a.Segment) {
			return model.Audience{}, nil, fieldError("unknown_segment", "audience.segment", "%q is not a segment name (GET /push/segments lists them)", clip(a.Segment))
		}
		// Resolved to its current version and filter by the submit.
		return model.Audience{Segment: &model.SegmentRef{Name: a.Segment}}, none, nil
	case a.All:
		return model.Audience{All: true}, none, nil
	case len(a.UserIDs) == 0:
		return model.Audience{}, nil, fieldError("empty_audience", "audience", `the audience is empty: set {"all": true} or a non-empty user_ids list`)
	case len(a.UserIDs) > r.MaxUserIDs:
		return model.Audience{}, nil, fieldError("too_many_user_ids", "audience.user_ids", "audience.user_ids has %d ids; at most %d are allowed per broadcast", len(a.UserIDs), r.MaxUserIDs)
	}
	seen := make(map[uint64]struct{}, len(a.UserIDs))
	ids := make([]uint64, 0, len(a.UserIDs))
	for _, id := range a.UserIDs {
		if id == 0 {
			return model.Audience{}, nil, fieldError("invalid_value", "audience.user_ids", "user ids must be positive integers; got 0")
		}
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			ids = append(ids, id)
		}
	}
	return model.Audience{UserIDs: ids}, none, nil
}

// segmentName is what a saved segment may be called.
var segmentName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// clip shortens request text quoted back in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// named binds a named audience's parameters (typed, never interpolated
// into SQL).
func (r Rules) named(a *AudienceSpec) (model.Audience, []string, error) {
	na, ok := r.Named.Load().Get(a.Name)
	if !ok {
		return model.Audience{}, nil, fieldError("unknown_audience", "audience.name", "no audience named %q is configured (GET /push/audiences lists them)", a.Name)
	}
	bound, err := na.Bind(a.Params)
	if err != nil {
		var pe *audience.ParamError
		if errors.As(err, &pe) {
			field := "audience.params"
			if ps := pe.Params(); len(ps) == 1 {
				field += "." + ps[0]
			}
			return model.Audience{}, nil, fieldError("invalid_params", field, "%v", err)
		}
		return model.Audience{}, nil, fieldError("invalid_params", "audience.params", "%v", err)
	}
	raw, err := bound.ParamsJSON()
	if err != nil {
		return model.Audience{}, nil, fieldError("invalid_params", "audience.params", "%v", err)
	}
	vars := na.Vars()
	if vars == nil {
		vars = []string{}
	}
	return model.Audience{Name: a.Name, Params: raw, TokenCursor: na.TokenCursor()}, vars, nil
}

// Bind looks a stored broadcast's named audience up in the current set
// and binds its parameters (the planner and the runs page it; a held one
// is counted). One a reload removed is not configured here any more: the
// plan or chunk run that binds it hands it back, as an instance of a
// rolling deploy that lacks it does.
func (r Rules) Bind(a model.Audience) (audience.Bound, error) {
	named, ok := r.Named.Load().Get(a.Name)
	if !ok {
		return audience.Bound{}, fmt.Errorf("named audience %q is not configured on this instance", a.Name)
	}
	return named.BindJSON(a.Params)
}

// WithAudiences is r reading the named audiences of s only: a reload
// checks the jobs against the set it would swap in.
func (r Rules) WithAudiences(s *audience.Set) Rules {
	r.Named = audience.NewCatalog(s)
	return r
}

// pinned is r reading one set for all its rules (the audience, its app,
// cap and category), whatever a reload swaps in meanwhile.
func (r Rules) pinned() Rules { return r.WithAudiences(r.Named.Load()) }
