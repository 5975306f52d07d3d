package script

import (
	"context"
	"testing"
	"time"
)

// BenchmarkRun is one small script with a few vars: what a script node
// costs a run (a fresh runtime and its bounded built-ins included).
func BenchmarkRun(b *testing.B) {
	s := New(Limits{})
	vars := map[string]any{"order": map[string]any{"items": []any{1.0, 2.0, 3.0}, "status": "paid"}}
	for b.Loop() {
		if _, err := s.Run(context.Background(), `return vars.order.items.reduce(function (a, b) { return a + b }, 0)`, vars, time.Second); err != nil {
			b.Fatal(err)
		}
	}
}
