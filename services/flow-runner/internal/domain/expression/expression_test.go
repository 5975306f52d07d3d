package expression

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEval(t *testing.T) {
	t.Parallel()
	vars := map[string]any{
		"n":     float64(3),
		"name":  "Ann",
		"items": []any{"a", "b"},
		"order": map[string]any{"body": map[string]any{"status": "shipped"}},
	}
	tests := []struct {
		name string
		give string
		want any
	}{
		{"number", "vars.n + 1", float64(4)},
		{"string concat", `vars.name + "!"`, "Ann!"},
		{"nested member", "vars.order.body.status", "shipped"},
		{"missing member is nil", "vars.missing.body.status", nil},
		{"missing with default", `vars.missing.x ?? "none"`, "none"},
		{"index", "vars.items[1]", "b"},
		{"len", "len(vars.items)", float64(2)},
		{"comparison", "vars.n > 2 && vars.name == 'Ann'", true},
		{"map literal", `{"a": vars.n}`, map[string]any{"a": float64(3)}},
		{"range", "1..3", []any{float64(1), float64(2), float64(3)}},
		{"filter", "filter(vars.items, # != 'a')", []any{"b"}},
		{"repeat", `repeat("ab", 2)`, "abab"},
		{"join", `join(vars.items, ",")`, "a,b"},
		{"toJSON", `toJSON({"a": [1, "x"]})`, `{"a":[1,"x"]}`},
		{"string of number", `string(vars.n)`, "3"},
		{"upper method-less", `upper(vars.name)`, "ANN"},
		{"concat", `concat([1], [2])`, []any{float64(1), float64(2)}},
		{"replace", `replace("aXa", "X", "-")`, "a-a"},
		{"reduce", `reduce(1..4, #acc + #, 0)`, float64(10)},
		{"sum and map", `sum(map(1..4, # * 2))`, float64(20)},
		{"predicate on members", `filter([{"a": 1}, {"a": 2}], #.a > 1)`, []any{map[string]any{"a": float64(2)}}},
		{"let", `let x = vars.n; x * x`, float64(9)},
		{"ternary", `vars.n > 1 ? "big" : "small"`, "big"},
		{"len in range", `1..len(vars.items)`, []any{float64(1), float64(2)}},
		// A run's numbers are float64s (JSON's): % takes them as it takes
		// integers (docs/flows.md "The expression language").
		{"modulo of a variable", "vars.n % 2", float64(1)},
		{"modulo of variables", "(vars.n + 4) % vars.n", float64(1)},
		{"modulo of integers", "7 % 3", float64(1)},
		{"modulo negative", "-7 % 3", float64(-1)},
		{"modulo of a fraction", "vars.n % 2.5", 0.5},
		{"even", "vars.n % 2 == 0", false},
		{"division", "vars.n / 2", 1.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Compile(tt.give)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Eval(vars)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	for _, give := range []string{
		"", "   ", "unknown.x", "vars.", "1 +", "os.Exit(1)", "timezone('UTC')",
		strings.Repeat("1+", 3000) + "1", strings.Repeat("x", MaxSourceBytes+1),
	} {
		if _, err := Compile(give); err == nil {
			t.Errorf("Compile(%.40q) accepted", give)
		}
	}
}

// TestBounded runs expressions that would allocate or run without bound
// under plain expr; each must end in an error, within the evaluation's time
// bound and without a panic.
func TestBounded(t *testing.T) {
	t.Parallel()
	// Two equal strings with their own bytes, so comparing them is real work.
	vars := map[string]any{"items": []any{1}, "big": strings.Repeat("x", 1<<20), "big2": strings.Repeat("x", 1<<20)}
	for _, give := range []string{
		`reduce(1..64, #acc + #acc, "xxxxxxxx")`,
		`repeat(repeat("x", 1000000), 1000000)`,
		`repeat("x", 2000000)`,
		`reduce(1..40, replace(#acc, "x", "xx"), "x")`,
		`join(map(1..100000, repeat("x", 1000)), "")`,
		`reduce(1..64, concat(#acc, #acc), [1])`,
		`reduce(1..64, toJSON(#acc), "\"")`,
		`reduce(1..80, toBase64(#acc), "xxxx")`,
		`1..100000000`,
		`map(1..1000, map(1..1000, map(1..1000, #)))`,
		`len(string(map(1..100000, repeat("x", 100))))`,
		`1 / 0`,
		`[1][5]`,
		`vars.items.foo()`,
		`all(1..900000, upper(vars.big) != "")`,
		`len(reduce(1..900000, #acc + "x", ""))`,
		`len(map(1..500000, upper(vars.big)))`,
		`map(1..900000, vars.big)`,
		`all(1..900000, vars.big == vars.big2)`,
	} {
		p, err := Compile(give)
		if err != nil {
			continue
		}
		start := time.Now()
		_, err = p.Eval(vars)
		// Bounded, not fast: a loaded machine under -race may take a few
		// steps past MaxEvalTime; unbounded would be minutes or hours.
		if d := time.Since(start); d > 5*MaxEvalTime {
			t.Errorf("Eval(%q) took %s", give, d)
		}
		if err == nil {
			t.Errorf("Eval(%q) succeeded", give)
		}
		var e *Error
		var se *SizeError
		if !errors.As(err, &e) && !errors.As(err, &se) {
			t.Errorf("Eval(%q): %T %v, want *Error", give, err, err)
		}
	}
}

// TestDivisionByZeroIsAnError: / and % by zero fail the expression
// (docs/flows.md "Expressions and templates"), also where the infinity it would
// give is compared rather than stored, and in a condition.
func TestDivisionByZeroIsAnError(t *testing.T) {
	t.Parallel()
	vars := map[string]any{"n": float64(3), "zero": float64(0)}
	for _, give := range []string{
		"1 / 0", "vars.n / 0", "vars.n / vars.zero > 1", "-vars.n / vars.zero < 0", "vars.zero / vars.zero != 1",
		"7 % 0", "vars.n % 0 == 0", "vars.n % vars.zero == 0",
	} {
		p, err := Compile(give)
		if err != nil {
			t.Fatalf("Compile(%q): %v", give, err)
		}
		if v, err := p.Eval(vars); err == nil || !strings.Contains(err.Error(), "division by zero") {
			t.Errorf("Eval(%q) = %#v, %v; want a division by zero", give, v, err)
		}
		if v, err := p.EvalBool(vars); err == nil {
			t.Errorf("EvalBool(%q) = %v, want an error", give, v)
		}
	}
	for _, give := range []string{`"a" / 2`, `vars.n % "2"`, "vars.missing % 2"} {
		p, err := Compile(give)
		if err != nil {
			continue
		}
		if v, err := p.Eval(vars); err == nil {
			t.Errorf("Eval(%q) = %#v, want an error", give, v)
		}
	}
}

func TestTemplate(t *testing.T) {
	t.Parallel()
	vars := map[string]any{"n": float64(3), "name": "Ann", "list": []any{float64(1), "x"}, "ok": true}
	tests := []struct {
		name string
		give string
		want any
	}{
		{"plain", "hello", "hello"},
		{"whole number keeps its type", "{{vars.n}}", float64(3)},
		{"whole with spaces", "{{ vars.n }}", float64(3)},
		{"whole bool", "{{vars.ok}}", true},
		{"whole list", "{{vars.list}}", []any{float64(1), "x"}},
		{"whole missing is nil", "{{vars.nope}}", nil},
		{"embedded number is text", "n={{vars.n}}", "n=3"},
		{"two parts", "{{vars.name}} has {{vars.n}}", "Ann has 3"},
		{"surrounded by a space is a string", " {{vars.n}}", " 3"},
		{"embedded list is JSON", "l={{vars.list}}", `l=[1,"x"]`},
		{"embedded nil is empty", "[{{vars.nope}}]", "[]"},
		{"lone closing braces", "a }} b", "a }} b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tm, err := ParseTemplate(tt.give)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tm.Render(vars)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestTemplateRefuses(t *testing.T) {
	t.Parallel()
	for _, give := range []string{"{{", "a {{ vars.n", "{{}}", "{{ nope }}", "{{ 1 + }}"} {
		if _, err := ParseTemplate(give); err == nil {
			t.Errorf("ParseTemplate(%q) accepted", give)
		}
	}
}

func TestValue(t *testing.T) {
	t.Parallel()
	v, err := CompileValue(map[string]any{
		"n":    "{{vars.n}}",
		"s":    "n is {{vars.n}}",
		"list": []any{"{{vars.n * 2}}", true, nil, float64(1.5)},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Render(map[string]any{"n": float64(3)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": float64(3), "s": "n is 3", "list": []any{float64(6), true, nil, 1.5}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

// A rendered value is bounded as it is built: its parts together pass
// MaxStringBytes at the part that passes it, whatever follows.
func TestValueBound(t *testing.T) {
	t.Parallel()
	part := "{{repeat('x', 400000)}}"
	for n, wantErr := range map[int]bool{2: false, 3: true, 100: true} {
		items := make([]any, n)
		for i := range items {
			items[i] = part
		}
		v, err := CompileValue(map[string]any{"parts": items, "range": "{{1..2}}"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.Render(nil)
		var size *SizeError
		if wantErr != errors.As(err, &size) {
			t.Fatalf("%d parts: %v", n, err)
		}
		if !wantErr && !reflect.DeepEqual(got.(map[string]any)["range"], []any{float64(1), float64(2)}) {
			t.Fatalf("%d parts: range rendered as %#v", n, got.(map[string]any)["range"])
		}
	}
}
