package script

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// BenchmarkRun is one small script with a few vars: what a script node
// costs a run, its worker process included. "started ahead" is a script
// that finds a worker waiting (scripts come no faster than workers
// start); "back to back" runs them as fast as they go, so each waits for
// a worker's start too, which is the CPU one script costs the machine.
func BenchmarkRun(b *testing.B) {
	vars := map[string]any{"order": map[string]any{"items": []any{1.0, 2.0, 3.0}, "status": "paid"}}
	const code = `return vars.order.items.reduce(function (a, b) { return a + b }, 0)`
	b.Run("started ahead", func(b *testing.B) {
		s := startedAhead(b, Limits{})
		for b.Loop() {
			b.StopTimer()
			wait.Until(b, 10*time.Second, "workers started ahead", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return len(s.idle) == idleWorkers
			})
			b.StartTimer()
			if _, err := s.Run(context.Background(), code, vars, time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("back to back", func(b *testing.B) {
		s := newSandbox(b, Limits{})
		for b.Loop() {
			if _, err := s.Run(context.Background(), code, vars, time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
}
