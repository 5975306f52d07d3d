// Package script runs flow script nodes: a JavaScript function body, run by
// goja, with the run's vars readable and nothing else.
//
// A script is a customer's code running inside the flow-runner, so the
// sandbox is built so that it can neither reach out nor take the process
// down:
//
//   - No I/O. Each run gets a fresh goja runtime, which has only the
//     ECMAScript built-ins: no require, no timers, no fetch, no console.
//     Nothing from Go is put in it but a deep copy of vars (through JSON),
//     so writes to vars never leak back.
//   - Time. The runtime is interrupted (vm.Interrupt) at the time limit
//     and when ctx ends; goja checks for that between instructions. One
//     built-in call is not interruptible, which is why the built-ins that
//     work or allocate in proportion to an argument are bounded (below).
//     Should a built-in still run on (a regular expression that
//     backtracks catastrophically), Run returns at the limit plus
//     AbandonAfter anyway, leaving that one goroutine to finish alone.
//   - Recursion. goja's call stack is capped (Limits.MaxCallDepth), so deep
//     recursion ends the script ("Maximum call stack size exceeded", which
//     the script cannot catch) instead of growing the Go stack, whose
//     overflow no recover can stop. For the same reason nesting is capped
//     where a built-in recurses over data (join, JSON.stringify).
//   - Memory, practically (goja has no hard cap). A watchdog samples the
//     process's heap (runtime/metrics) every millisecond and interrupts
//     the script when the heap has grown by more than Limits.MemoryBudget
//     since it started and a forced GC shows the growth is live, or by
//     more than twice the budget at all; this catches growth one
//     instruction at a time (string doubling, arrays filled in a loop).
//     Growth in a single step is refused before it happens: ArrayBuffer,
//     DataView and the typed arrays are removed (they allocate their
//     whole length at once);
//     String.prototype.repeat, padStart, padEnd, replace, replaceAll and
//     concat refuse results over Limits.MaxStringLength; every other
//     String.prototype method refuses a receiver that long; every
//     Array.prototype method, Array.from, Function.prototype.apply,
//     Reflect.apply and Reflect.construct refuse an array-like longer than
//     Limits.MaxArrayLength (new Array(1e9) is cheap; filling or joining
//     it is not); join and JSON.stringify estimate their output first and
//     refuse it over Limits.MaxStringLength, and JSON.stringify refuses
//     nesting deeper than Limits.MaxDepth.
//   - Result. The return value is turned into JSON-like Go values through
//     JSON.stringify (so functions and undefined become nothing, NaN null),
//     refused over Limits.MaxResultBytes.
//   - Panics. The script runs in its own goroutine, where a panic would
//     end the process: any panic there is recovered and becomes an error.
//     Nothing of the script (not even a thrown value's text) is read
//     outside that goroutine and the watchdog.
//
// What is only bounded loosely: the heap is the process's, so the memory
// budget is approximate (other goroutines' allocations count toward it
// until a GC), and the step that crosses it may be large: a string doubled
// by += allocates twice its length in one instruction, so such a script
// peaks at a few budgets before it is stopped (112 MiB of heap for a
// 32 MiB budget in the tests; more when the machine is busy and the
// watchdog is scheduled late). A custom toString or toJSON can make
// join's or stringify's estimate too low, and a regular expression that
// backtracks catastrophically runs on in its goroutine after Run has
// returned. A hard bound on all of it would take a separate process.
package script

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/dop251/goja"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Limits bound one run; Defaults fills in what is zero.
type Limits struct {
	// MaxCallDepth caps goja's call stack.
	MaxCallDepth int
	// MemoryBudget is how far the heap may grow during a run.
	MemoryBudget uint64
	// MaxStringLength bounds strings built by one built-in call, in UTF-16
	// code units (JavaScript's length).
	MaxStringLength int
	// MaxArrayLength bounds the array-likes one built-in call walks.
	MaxArrayLength int
	// MaxDepth bounds nesting for JSON.stringify and the result.
	MaxDepth int
	// MaxResultBytes bounds the result as JSON.
	MaxResultBytes int
	// AbandonAfter is how long past the limit Run waits for a built-in
	// that does not heed the interrupt before it returns without it.
	AbandonAfter time.Duration
}

// Defaults are the limits of a Sandbox built with zero Limits.
var Defaults = Limits{
	MaxCallDepth:    512,
	MemoryBudget:    32 << 20,
	MaxStringLength: 1 << 20,
	MaxArrayLength:  1 << 17,
	MaxDepth:        64,
	MaxResultBytes:  1 << 20,
	AbandonAfter:    time.Second,
}

// Kind sorts a script's failures.
type Kind string

// The kinds of Error.
const (
	KindSyntax    Kind = "syntax"    // the code does not parse
	KindException Kind = "exception" // the script threw, built-in limits included
	KindTimeout   Kind = "timeout"   // it ran past its time limit
	KindMemory    Kind = "memory"    // it grew the heap past the budget
	KindResult    Kind = "result"    // its result is too large or too deep
	KindCanceled  Kind = "canceled"  // ctx ended first
	KindInternal  Kind = "internal"  // vars could not be copied in, or the sandbox panicked
)

// Error is a script's failure, with a message fit for a node's error.
type Error struct {
	Kind    Kind
	Message string
	cause   error
}

func (e *Error) Error() string { return e.Message }

// Unwrap gives ctx's error for KindCanceled.
func (e *Error) Unwrap() error { return e.cause }

// Sandbox runs scripts; it holds no state between runs and is safe for
// concurrent use.
type Sandbox struct {
	limits Limits
}

var _ run.Scripts = (*Sandbox)(nil)

// New returns a Sandbox bounded by l, Defaults where l is zero.
func New(l Limits) *Sandbox {
	d := Defaults
	orDefault(&d.MaxCallDepth, l.MaxCallDepth)
	orDefault(&d.MemoryBudget, l.MemoryBudget)
	orDefault(&d.MaxStringLength, l.MaxStringLength)
	orDefault(&d.MaxArrayLength, l.MaxArrayLength)
	orDefault(&d.MaxDepth, l.MaxDepth)
	orDefault(&d.MaxResultBytes, l.MaxResultBytes)
	orDefault(&d.AbandonAfter, l.AbandonAfter)
	return &Sandbox{limits: d}
}

// orDefault sets *dst to v when v is set.
func orDefault[T int | uint64 | time.Duration](dst *T, v T) {
	if v > 0 {
		*dst = v
	}
}

// Run runs code, a JavaScript function body, with vars readable as `vars`,
// and returns what it returns as JSON-like Go values (nil, bool, float64,
// string, []any, map[string]any). It stops at limit or when ctx ends. Every
// failure is an *Error.
func (s *Sandbox) Run(ctx context.Context, code string, vars map[string]any, limit time.Duration) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, canceled(err)
	}
	if vars == nil {
		vars = map[string]any{}
	}
	varsJSON, err := json.Marshal(vars)
	if err != nil {
		return nil, &Error{Kind: KindInternal, Message: "vars are not JSON-like: " + err.Error()}
	}

	type outcome struct {
		v   any
		err error
	}
	done := make(chan outcome, 1)
	vm := goja.New()
	go func() {
		var o outcome
		defer func() {
			if p := recover(); p != nil {
				o = outcome{err: &Error{Kind: KindInternal, Message: fmt.Sprintf("script sandbox failed: %v", p)}}
			}
			done <- o
		}()
		o.v, o.err = s.run(vm, code, string(varsJSON))
	}()

	stop := s.watch(ctx, vm, limit)
	defer stop()
	abandon := time.NewTimer(limit + s.limits.AbandonAfter)
	defer abandon.Stop()
	select {
	case o := <-done:
		return o.v, s.describe(ctx, limit, o.err)
	case <-abandon.C:
		// A built-in that does not heed the interrupt: its goroutine
		// finishes alone, and its result is dropped.
		if ctx.Err() != nil {
			return nil, canceled(ctx.Err())
		}
		return nil, timeout(limit)
	}
}

// The reasons a run is interrupted, passed to vm.Interrupt.
type (
	interruptTimeout  struct{}
	interruptMemory   struct{}
	interruptCanceled struct{ err error }
)

// watch interrupts vm at the limit, when ctx ends, or when the heap grows
// past the budget. The returned func stops watching.
func (s *Sandbox) watch(ctx context.Context, vm *goja.Runtime, limit time.Duration) func() {
	stopped := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		deadline := time.NewTimer(limit)
		defer deadline.Stop()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		base := heapBytes()
		// A GC runs in its own goroutine, so the loop keeps checking the
		// hard ceiling while it does (a doubling string doubles a few
		// times during one GC). confirmed says whether live growth was
		// over the budget after it.
		confirmed := make(chan bool, 1)
		var gcRunning bool
		var lastGC time.Time
		for {
			select {
			case <-stopped:
				return
			case <-ctx.Done():
				vm.Interrupt(interruptCanceled{ctx.Err()})
				return
			case <-deadline.C:
				vm.Interrupt(interruptTimeout{})
				return
			case over := <-confirmed:
				gcRunning = false
				if over {
					vm.Interrupt(interruptMemory{})
					return
				}
			case <-tick.C:
				heap := heapBytes()
				if heap < base+s.limits.MemoryBudget {
					continue
				}
				// The heap counts garbage until a GC sweeps it: between
				// one and two budgets, only live growth stops the script;
				// past two, it stops at once. A GC at most every 50 ms
				// keeps a churning script from collecting nonstop.
				if heap >= base+2*s.limits.MemoryBudget {
					vm.Interrupt(interruptMemory{})
					return
				}
				if gcRunning || time.Since(lastGC) < 50*time.Millisecond {
					continue
				}
				gcRunning, lastGC = true, time.Now()
				go func() {
					runtime.GC()
					confirmed <- heapBytes() >= base+s.limits.MemoryBudget
				}()
			}
		}
	}()
	return func() {
		close(stopped)
		<-finished
	}
}

// heapBytes is the process's heap in objects, live or not yet swept.
// metrics.Read does not stop the world, unlike runtime.ReadMemStats.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// run compiles code as the body of function(vars), calls it and exports
// the result, all inside vm.
func (s *Sandbox) run(vm *goja.Runtime, code, varsJSON string) (any, error) {
	vm.SetMaxCallStackSize(s.limits.MaxCallDepth)
	h := newHardening(vm, s.limits)
	// vars is parsed before the built-ins are bounded: it may be larger
	// than a script may build, and it is ours.
	vars, err := h.parse(varsJSON)
	if err != nil {
		return nil, err
	}
	if err := h.install(); err != nil {
		return nil, &Error{Kind: KindInternal, Message: "script sandbox failed: " + err.Error()}
	}
	fn, err := h.compile(code)
	if err != nil {
		return nil, err
	}
	ret, err := fn(goja.Undefined(), vars)
	if err != nil {
		return nil, h.exception(err)
	}
	v, err := h.export(ret)
	if err != nil {
		return nil, h.exception(err)
	}
	return v, nil
}

// describe turns what a run ended with into an *Error.
func (s *Sandbox) describe(ctx context.Context, limit time.Duration, err error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return se
	}
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		switch v := ie.Value().(type) {
		case interruptTimeout:
			return timeout(limit)
		case interruptMemory:
			return &Error{Kind: KindMemory, Message: fmt.Sprintf("script used more memory than its budget of %s", size(s.limits.MemoryBudget))}
		case interruptCanceled:
			return canceled(v.err)
		}
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		return &Error{Kind: KindException, Message: "script threw: RangeError: Maximum call stack size exceeded"}
	}
	if ctx.Err() != nil {
		return canceled(ctx.Err())
	}
	return &Error{Kind: KindInternal, Message: "script failed: " + err.Error()}
}

func timeout(limit time.Duration) *Error {
	return &Error{Kind: KindTimeout, Message: fmt.Sprintf("script ran past its time limit of %s", limit)}
}

func canceled(err error) *Error {
	return &Error{Kind: KindCanceled, Message: "script stopped: " + err.Error(), cause: err}
}

// size writes a limit in MiB when it is whole MiB, as they are documented.
func size(n uint64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
