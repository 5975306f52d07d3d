package script

import (
	"context"
	"errors"
	"testing"
	"time"
)

// FuzzRun feeds arbitrary code, as developers write it into script nodes:
// Run must never panic, must end near its limit whatever the code does,
// and every failure must be an *Error.
func FuzzRun(f *testing.F) {
	for _, seed := range []string{
		`return vars.a + 1`,
		`return {x: [1, "two", null]}`,
		`for (;;) {}`,
		`return "x".repeat(1e9)`,
		`var s = "x"; for (var i = 0; i < 40; i++) s += s; return s.length`,
		`function f() { return f() } return f()`,
		`}); (function () {`,
		`return (`,
		`throw {toString: function () { throw 1 }}`,
		`return JSON.stringify(new Array(1e6))`,
		`var a = []; a[1e9] = 1; return a.join()`,
		`return Object.getOwnPropertyNames(this)`,
	} {
		f.Add(seed)
	}
	s := New(Limits{})
	f.Fuzz(func(t *testing.T, code string) {
		const limit = 100 * time.Millisecond
		start := time.Now()
		_, err := s.Run(context.Background(), code, map[string]any{"a": 1}, limit)
		if took := time.Since(start); took > limit+2*time.Second {
			t.Fatalf("Run(%q) took %s", code, took)
		}
		var se *Error
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("Run(%q) = %v (%T), want an *Error", code, err, err)
		}
	})
}
