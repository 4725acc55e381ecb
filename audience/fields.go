package audience

import "errors"

// Named is one string of a message that may be a template, under the name
// its errors carry (a path such as "android.notification.title").
type Named struct {
	Name, Src string
}

// Fields is a list of named strings parsed as templates by the rules of
// ParseTemplate, for values beyond title, body and data (FCM's platform
// overrides). It is safe for concurrent use.
type Fields struct {
	fields []field
	static bool
}

// ParseFields parses every value as a text/template template
// (missingkey=error). vars works as for ParseTemplate: non-nil refuses a
// variable outside it, naming the field. Every problem is reported, joined.
func ParseFields(named []Named, vars []string) (*Fields, error) {
	f := &Fields{static: true}
	known := map[string]bool{}
	for _, v := range vars {
		known[v] = true
	}
	var errs []error
	for _, n := range named {
		fl, refs, err := parseOne(n.Name, n.Src)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if fl.tmpl != nil {
			f.static = false
		}
		for _, r := range refs {
			if vars != nil && !known[r] {
				errs = append(errs, &TemplateError{Field: n.Name, Variable: r, Err: unknownVar(r, vars)})
			}
		}
		f.fields = append(f.fields, fl)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return f, nil
}

// IsStatic reports whether no value has an action.
func (f *Fields) IsStatic() bool { return f.static }

// Render renders every value for one recipient's variables, in the order
// they were given. An error is a *TemplateError naming the first value that
// failed.
func (f *Fields) Render(vars map[string]string) ([]string, error) {
	out := make([]string, len(f.fields))
	for i := range f.fields {
		v, err := f.fields[i].render(vars)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}
