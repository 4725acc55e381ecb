package audience

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
)

// TemplateError is a message template that does not parse, refers to an
// unknown variable or template, or fails to render for one recipient. Field
// is "title", "body" or "data.<key>"; Variable is set when the problem is an
// unknown variable.
type TemplateError struct {
	Field    string
	Variable string
	Err      error
}

func (e *TemplateError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *TemplateError) Unwrap() error { return e.Err }

// Template is a message whose title, body and data values may be
// text/template templates over an audience's variables ({{.plan}}), strict
// about missing keys. It is safe for concurrent use.
type Template struct {
	title, body field
	data        []field // sorted by key
	static      bool
	variables   []string
}

// field is one parsed title, body or data value.
type field struct {
	name string // "title", "body", "data.<key>"
	key  string // the data key
	tmpl *template.Template
	text string // the value when tmpl is nil (no actions)
}

// ParseTemplate parses the title, body and data values as text/template
// templates (missingkey=error). A value that does not parse is a
// *TemplateError naming its field. When vars is non-nil, a reference to a
// variable not in vars ({{.x}} or {{$.x}}, anywhere in the template) is an
// error at parse time too, naming the field and the variable: pass the
// audience's Vars(), or an empty non-nil slice for the built-in audiences,
// which have no variables. A nil vars skips that check (then a missing
// variable is only found by Render). Every problem is reported, joined.
func ParseTemplate(title, body string, data map[string]string, vars []string) (*Template, error) {
	t := &Template{static: true}
	var errs []error
	known := map[string]bool{}
	for _, v := range vars {
		known[v] = true
	}
	used := map[string]bool{}
	parseField := func(name, key, src string) field {
		f, refs, err := parseOne(name, src)
		if err != nil {
			errs = append(errs, err)
			return f
		}
		f.key = key
		if f.tmpl != nil {
			t.static = false
		}
		for _, r := range refs {
			used[r] = true
			if vars != nil && !known[r] {
				errs = append(errs, &TemplateError{Field: name, Variable: r, Err: unknownVar(r, vars)})
			}
		}
		return f
	}
	t.title = parseField("title", "", title)
	t.body = parseField("body", "", body)
	for _, k := range slices.Sorted(maps.Keys(data)) {
		t.data = append(t.data, parseField("data."+k, k, data[k]))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t.variables = slices.Sorted(maps.Keys(used))
	return t, nil
}

func unknownVar(name string, vars []string) error {
	if len(vars) == 0 {
		return fmt.Errorf("unknown variable %q: this audience has no variables", name)
	}
	return fmt.Errorf("unknown variable %q (the audience has: %s)", name, strings.Join(vars, ", "))
}

// parseOne parses one value. A value without actions (plain text, or only
// comments) is kept as text, with tmpl nil. refs lists the variables it
// refers to, in order of appearance, once each.
func parseOne(name, src string) (field, []string, error) {
	f := field{name: name}
	tmpl, err := template.New(name).Option("missingkey=error").Parse(src)
	if err != nil {
		return f, nil, &TemplateError{Field: name, Err: err}
	}
	if text, ok := staticText(tmpl); ok {
		f.text = text
		return f, nil, nil
	}
	var refs []string
	seen := map[string]bool{}
	var undefined []string
	for _, tt := range tmpl.Templates() {
		if tt.Tree == nil {
			continue
		}
		walk(tt.Tree.Root, func(n parse.Node) {
			var ref string
			switch n := n.(type) {
			case *parse.FieldNode:
				ref = n.Ident[0]
			case *parse.VariableNode:
				if len(n.Ident) > 1 && n.Ident[0] == "$" {
					ref = n.Ident[1]
				}
			case *parse.TemplateNode:
				if tmpl.Lookup(n.Name) == nil && !slices.Contains(undefined, n.Name) {
					undefined = append(undefined, n.Name)
				}
			}
			if ref != "" && !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		})
	}
	if len(undefined) > 0 {
		return f, nil, &TemplateError{Field: name, Err: fmt.Errorf("calls undefined template %q", undefined[0])}
	}
	f.tmpl = tmpl
	return f, refs, nil
}

// staticText returns the output of a template without actions: the
// concatenation of its text (comments and trim markers already applied by
// the parser).
func staticText(t *template.Template) (string, bool) {
	if len(t.Templates()) > 1 {
		return "", false // {{define}}s: not worth special-casing
	}
	if t.Tree == nil || t.Tree.Root == nil {
		return "", true
	}
	var b strings.Builder
	for _, n := range t.Tree.Root.Nodes {
		tn, ok := n.(*parse.TextNode)
		if !ok {
			return "", false
		}
		b.Write(tn.Text)
	}
	return b.String(), true
}

// walk calls visit on n and every node below it.
func walk(n parse.Node, visit func(parse.Node)) {
	switch n := n.(type) {
	case nil:
		return
	case *parse.ListNode:
		if n == nil {
			return
		}
		visit(n)
		for _, c := range n.Nodes {
			walk(c, visit)
		}
	case *parse.ActionNode:
		visit(n)
		walk(n.Pipe, visit)
	case *parse.IfNode:
		visit(n)
		walkBranch(&n.BranchNode, visit)
	case *parse.RangeNode:
		visit(n)
		walkBranch(&n.BranchNode, visit)
	case *parse.WithNode:
		visit(n)
		walkBranch(&n.BranchNode, visit)
	case *parse.TemplateNode:
		visit(n)
		if n.Pipe != nil {
			walk(n.Pipe, visit)
		}
	case *parse.PipeNode:
		if n == nil {
			return
		}
		visit(n)
		for _, d := range n.Decl {
			walk(d, visit)
		}
		for _, c := range n.Cmds {
			walk(c, visit)
		}
	case *parse.CommandNode:
		visit(n)
		for _, a := range n.Args {
			walk(a, visit)
		}
	case *parse.ChainNode:
		visit(n)
		walk(n.Node, visit) // its Field names apply to n.Node's result, not to the variables
	default:
		visit(n)
	}
}

func walkBranch(b *parse.BranchNode, visit func(parse.Node)) {
	if b.Pipe != nil {
		walk(b.Pipe, visit)
	}
	if b.List != nil {
		walk(b.List, visit)
	}
	if b.ElseList != nil {
		walk(b.ElseList, visit)
	}
}

// IsStatic reports whether no value has an action: every recipient gets the
// same message, and Render need not be called per recipient.
func (t *Template) IsStatic() bool { return t.static }

// Render renders the message for one recipient's variables (a Row's Vars).
// An error (a missing key, an execution error) is a *TemplateError naming
// the first field that failed. data is a new map on every call (nil when the
// message has no data).
func (t *Template) Render(vars map[string]string) (title, body string, data map[string]string, err error) {
	if title, err = t.title.render(vars); err != nil {
		return "", "", nil, err
	}
	if body, err = t.body.render(vars); err != nil {
		return "", "", nil, err
	}
	if len(t.data) > 0 {
		data = make(map[string]string, len(t.data))
		for i := range t.data {
			f := &t.data[i]
			v, err := f.render(vars)
			if err != nil {
				return "", "", nil, err
			}
			data[f.key] = v
		}
	}
	return title, body, data, nil
}

func (f *field) render(vars map[string]string) (string, error) {
	if f.tmpl == nil {
		return f.text, nil
	}
	var b strings.Builder
	if err := f.tmpl.Execute(&b, vars); err != nil {
		return "", &TemplateError{Field: f.name, Err: err}
	}
	return b.String(), nil
}
