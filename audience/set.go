package audience

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Entry is one audience of a Set: compiled and checked, with what the
// configuration says of its broadcasts beside it.
type Entry struct {
	*Audience
	// App is the app whose tokens it returns (resolved: never "" with one
	// app).
	App string
	// FrequencyCap names the cap of its broadcasts as the configuration
	// gives it (a frequency_caps name, off or default); "": the default.
	FrequencyCap string
	// Category is the message category of its broadcasts ("": the
	// request's, or default_category).
	Category string
	// def is the definition as written, which a reload compares.
	def Definition
}

// Set is one immutable set of named audiences: what a start-up or a
// reload made, read whole. Nothing changes a Set once built; a reload
// builds another and swaps it into the Catalog. The zero Set (and a nil
// one) holds no audience.
type Set struct {
	list   []*Entry // in configuration order
	byName map[string]*Entry
	at     time.Time
}

// NewSet builds a Set of the compiled audiences auds, which must come
// from Compile(defs) (same names; Check'ed); appOf resolves a
// definition's app ("" with one app) to the app's name. at is when the
// set was loaded.
func NewSet(auds []*Audience, defs []Definition, appOf func(string) string, at time.Time) *Set {
	byDef := make(map[string]Definition, len(defs))
	for _, d := range defs {
		byDef[d.Name] = d
	}
	s := &Set{byName: make(map[string]*Entry, len(auds)), at: at}
	for _, a := range auds {
		d := byDef[a.Name()]
		n := &Entry{Audience: a, App: appOf(d.App), FrequencyCap: d.FrequencyCap, Category: d.Category, def: d}
		s.list = append(s.list, n)
		s.byName[a.Name()] = n
	}
	return s
}

// Get is the audience called name.
func (s *Set) Get(name string) (*Entry, bool) {
	if s == nil || name == "" {
		return nil, false
	}
	n, ok := s.byName[name]
	return n, ok
}

// List is every audience, in configuration order (the caller must not
// change it).
func (s *Set) List() []*Entry {
	if s == nil {
		return nil
	}
	return s.list
}

// Names are the audiences' names, in configuration order.
func (s *Set) Names() []string {
	out := []string{}
	for _, n := range s.List() {
		out = append(out, n.Name())
	}
	return out
}

// LoadedAt is when the set was loaded (start-up or a reload).
func (s *Set) LoadedAt() time.Time {
	if s == nil {
		return time.Time{}
	}
	return s.at
}

// Catalog holds the current Set: every user loads it at the moment of
// use, and a reload swaps the whole set at once, so no reader ever sees
// half of one set and half of another, and no lock is taken to read it.
// A nil Catalog holds the empty set.
type Catalog struct{ cur atomic.Pointer[Set] }

// NewCatalog holds s (nil: the empty set).
func NewCatalog(s *Set) *Catalog {
	c := &Catalog{}
	c.Swap(s)
	return c
}

// Load is the current set (never nil).
func (c *Catalog) Load() *Set {
	if c == nil {
		return &Set{}
	}
	if s := c.cur.Load(); s != nil {
		return s
	}
	return &Set{}
}

// Swap makes s the current set and returns the one it replaced.
func (c *Catalog) Swap(s *Set) *Set {
	if s == nil {
		s = &Set{}
	}
	return c.cur.Swap(s)
}

// Build compiles defs and checks every one against the database as
// start-up does (Compile, then Runner.Check with timeout each), and
// returns them as a Set, or every problem found, joined.
func Build(ctx context.Context, r *Runner, defs []Definition, appOf func(string) string, timeout time.Duration, at time.Time) (*Set, error) {
	auds, err := Compile(defs)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range auds {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		if err := r.Check(cctx, a); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return NewSet(auds, defs, appOf, at), nil
}

// Changes are what a reload changed, by audience name, each sorted.
type Changes struct {
	Added, Removed, Changed []string
}

// Diff is what changed from old to s: audiences added, removed, and those
// whose definition (SQL, parameters, description, app, cap, category)
// changed.
func (s *Set) Diff(old *Set) Changes {
	c := Changes{Added: []string{}, Removed: []string{}, Changed: []string{}}
	for _, n := range s.List() {
		o, ok := old.Get(n.Name())
		switch {
		case !ok:
			c.Added = append(c.Added, n.Name())
		case !sameDefinition(o, n):
			c.Changed = append(c.Changed, n.Name())
		}
	}
	for _, o := range old.List() {
		if _, ok := s.Get(o.Name()); !ok {
			c.Removed = append(c.Removed, o.Name())
		}
	}
	slices.Sort(c.Added)
	slices.Sort(c.Removed)
	slices.Sort(c.Changed)
	return c
}

func sameDefinition(a, b *Entry) bool {
	x, y := a.def, b.def
	return x.SQL == y.SQL && x.Description == y.Description && maps.Equal(x.Params, y.Params) &&
		a.App == b.App && x.FrequencyCap == y.FrequencyCap && x.Category == y.Category
}

// ReloadError is a reload that failed: every problem found, each naming
// its audience or job. The current set stays.
type ReloadError struct{ Problems []string }

func (e *ReloadError) Error() string {
	return fmt.Sprintf("reloading the named audiences failed (the current ones stay): %d problem(s): %v", len(e.Problems), e.Problems)
}

// Problems splits err (errors.Join's lines) into its problems, one a
// line.
func Problems(err error) []string {
	if err == nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}
