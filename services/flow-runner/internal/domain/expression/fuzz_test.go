package expression

import (
	"testing"
	"time"
)

// FuzzEval checks that compiling and evaluating any expression, and parsing
// and rendering any template, ends in a value or an error: never a panic,
// never an unbounded run.
func FuzzEval(f *testing.F) {
	for _, s := range []string{
		"vars.n + 1", `vars.name + "!"`, "vars.order.body.status", "len(vars.items)", `{"a": vars.n}`,
		`reduce(1..64, #acc + #acc, "xxxxxxxx")`, `repeat(repeat("x", 1000000), 1000000)`,
		`join(map(1..100000, repeat("x", 1000)), "")`, `reduce(1..64, concat(#acc, #acc), [1])`,
		`map(1..1000, map(1..1000, map(1..1000, #)))`, `sortBy(1..1000, -#)`, `toJSON(vars)`,
		"Hi {{vars.name}}", "{{vars.items}}", "{{ 1 / 0 }}",
	} {
		f.Add(s)
	}
	vars := map[string]any{
		"n": float64(3), "name": "Ann", "items": []any{"a", float64(2), nil},
		"order": map[string]any{"body": map[string]any{"status": "shipped"}},
	}
	f.Fuzz(func(t *testing.T, src string) {
		start := time.Now()
		if p, err := Compile(src); err == nil {
			_, _ = p.Eval(vars)
			_, _ = p.EvalBool(vars)
		}
		if tm, err := ParseTemplate(src); err == nil {
			_, _ = tm.Render(vars)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%q took %s", src, d)
		}
	})
}
