package expression

import (
	"errors"
	"fmt"
	"strings"
)

// Template is a string that may hold `{{ expression }}` parts, compiled once.
// A template that is one expression and nothing else keeps the expression's
// value ("{{vars.n}}" renders the number 3, not "3"); any other renders a
// string, each expression shown by Text.
type Template struct {
	raw   string
	parts []part
	whole *Program
}

type part struct {
	text string
	prog *Program
}

// TemplateError is a template that does not compile.
type TemplateError struct {
	Template string
	Err      error
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("template %q: %s", clip(e.Template), e.Err)
}

func (e *TemplateError) Unwrap() error { return e.Err }

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// ParseTemplate compiles every expression of s. An expression runs from
// `{{` to the first `}}` after it; a `{{` without its `}}` is refused, as is
// an empty expression.
func ParseTemplate(s string) (*Template, error) {
	t := &Template{raw: s}
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			if rest != "" {
				t.parts = append(t.parts, part{text: rest})
			}
			break
		}
		if i > 0 {
			t.parts = append(t.parts, part{text: rest[:i]})
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			return nil, &TemplateError{Template: s, Err: errors.New("{{ without its }}")}
		}
		src := rest[i+2 : i+2+j]
		p, err := Compile(strings.TrimSpace(src))
		if err != nil {
			return nil, &TemplateError{Template: s, Err: err}
		}
		t.parts = append(t.parts, part{prog: p})
		rest = rest[i+2+j+2:]
	}
	if len(t.parts) == 1 && t.parts[0].prog != nil {
		t.whole = t.parts[0].prog
	}
	return t, nil
}

// MustTemplate is ParseTemplate for strings known to be plain (tests, and
// values built by the domain itself); it panics on an error.
func MustTemplate(s string) *Template {
	t, err := ParseTemplate(s)
	if err != nil {
		panic(err)
	}
	return t
}

// Raw returns the template as written.
func (t *Template) Raw() string { return t.raw }

// IsStatic reports whether the template holds no expression.
func (t *Template) IsStatic() bool {
	for _, p := range t.parts {
		if p.prog != nil {
			return false
		}
	}
	return true
}

// Render evaluates the template over vars.
func (t *Template) Render(vars map[string]any) (any, error) {
	if t == nil {
		return nil, nil
	}
	if t.whole != nil {
		return t.whole.Eval(vars)
	}
	return t.RenderString(vars)
}

// RenderString evaluates the template over vars into a string, whatever its
// form: a whole-string expression is shown as Text would show it.
func (t *Template) RenderString(vars map[string]any) (string, error) {
	if t == nil {
		return "", nil
	}
	var b strings.Builder
	for _, p := range t.parts {
		s := p.text
		if p.prog != nil {
			v, err := p.prog.run(vars)
			if err != nil {
				return "", err
			}
			if s, err = Text(v, MaxStringBytes-b.Len()); err != nil {
				return "", &Error{Source: p.prog.source, Err: err}
			}
		}
		if b.Len()+len(s) > MaxStringBytes {
			return "", &TemplateError{Template: t.raw, Err: tooLong()}
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// Value is a JSON tree whose strings are templates: an http body, an end
// output, a call_flow input.
type Value struct {
	kind  byte // 'n' nil, 'l' literal, 't' template, 'a' array, 'o' object
	lit   any
	tmpl  *Template
	items []*Value
	keys  []string
}

// CompileValue compiles every string of a decoded JSON tree (as
// encoding/json decodes into any) as a template.
func CompileValue(v any) (*Value, error) {
	return compileValue(v, 0)
}

func compileValue(v any, depth int) (*Value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case nil:
		return &Value{kind: 'n'}, nil
	case string:
		t, err := ParseTemplate(x)
		if err != nil {
			return nil, err
		}
		if t.IsStatic() {
			return &Value{kind: 'l', lit: x}, nil
		}
		return &Value{kind: 't', tmpl: t}, nil
	case []any:
		out := &Value{kind: 'a'}
		for _, e := range x {
			c, err := compileValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			out.items = append(out.items, c)
		}
		return out, nil
	case map[string]any:
		out := &Value{kind: 'o'}
		for k, e := range x {
			c, err := compileValue(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out.keys = append(out.keys, k)
			out.items = append(out.items, c)
		}
		return out, nil
	default:
		n, err := Normalize(v, MaxStringBytes)
		if err != nil {
			return nil, err
		}
		return &Value{kind: 'l', lit: n}, nil
	}
}

// IsObject reports whether the value is a JSON object.
func (v *Value) IsObject() bool { return v != nil && v.kind == 'o' }

// IsString reports whether the value is one string (a template or not).
func (v *Value) IsString() bool {
	if v == nil {
		return false
	}
	_, lit := v.lit.(string)
	return v.kind == 't' || (v.kind == 'l' && lit)
}

// Render evaluates every template of the tree over vars. The result is a
// fresh JSON tree, at most MaxStringBytes large when encoded. The bound
// holds as the tree is built: rendering stops at the first part that
// passes it, so that a tree of a thousand templates of 1 MiB each never
// takes more than the bound and one template's value.
func (v *Value) Render(vars map[string]any) (any, error) {
	n := normalizer{left: MaxStringBytes, limit: MaxStringBytes}
	return v.render(vars, &n, 0)
}

// render is Normalize of the rendered tree, done as it is rendered.
func (v *Value) render(vars map[string]any, n *normalizer, depth int) (any, error) {
	if v == nil {
		return n.value(nil, depth)
	}
	switch v.kind {
	case 'l':
		return n.value(v.lit, depth)
	case 't':
		r, err := v.tmpl.Render(vars)
		if err != nil {
			return nil, err
		}
		return n.value(r, depth)
	case 'a':
		if err := n.take(2 + len(v.items)); err != nil {
			return nil, err
		}
		out := make([]any, len(v.items))
		for i, e := range v.items {
			r, err := e.render(vars, n, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case 'o':
		if err := n.take(2 + len(v.items)); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(v.items))
		for i, e := range v.items {
			if err := n.take(len(v.keys[i]) + 3); err != nil {
				return nil, err
			}
			r, err := e.render(vars, n, depth+1)
			if err != nil {
				return nil, err
			}
			out[v.keys[i]] = r
		}
		return out, nil
	}
	return n.value(nil, depth)
}
