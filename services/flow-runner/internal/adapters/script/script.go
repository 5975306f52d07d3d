// Package script runs flow script nodes: a JavaScript function body, run by
// goja, with the run's vars readable and nothing else.
//
// A script is a customer's code, so it runs where it can be stopped for
// certain: in a process of its own, a worker, which is the flow-runner's
// own binary started with the command word WorkerCommand
// (RunWorkerIfAsked, called first in main). A worker runs one script and
// exits, so nothing of one script reaches the next. The Sandbox keeps a
// few workers started ahead (idleWorkers), so a script does not wait for
// a process to start. The bounds that matter are the kernel's, which a
// worker sets on itself before it runs its script and cannot lift again
// (the soft limit is the hard one):
//
//   - Time. The Sandbox kills the worker (SIGKILL) at the script's time
//     limit or when ctx ends, and reaps it before Run returns: no work of
//     a script outlives its answer, whatever it was doing (a regular
//     expression that backtracks catastrophically included), so the
//     caller's concurrency place is held until the work has stopped. A
//     worker runs Go on one core (GOMAXPROCS 1), so its time limit bounds
//     the CPU it uses; RLIMIT_CPU, the limit rounded up, kills it anyway
//     should the flow-runner be unable to.
//   - Memory. The worker caps its writable memory (RLIMIT_DATA) at what it
//     holds when it starts plus Limits.MemoryLimit (96 MiB: the 32 MiB
//     budget, the garbage the collector has not reclaimed yet, and the
//     runtime's own needs), and tells the Go runtime to collect hard
//     before that (debug.SetMemoryLimit). An allocation past the cap ends
//     the worker ("out of memory"), never the flow-runner. Inside that, a
//     watchdog stops a script that grows the heap by more than
//     Limits.MemoryBudget (live, after a GC) or by twice it at all, with
//     a clearer error than the cap's.
//   - No I/O. Each worker has a fresh goja runtime, which has only the
//     ECMAScript built-ins: no require, no timers, no fetch, no console.
//     Nothing from Go is put in it but a deep copy of vars (through JSON),
//     so writes to vars never leak back. Of the flow-runner's environment
//     the worker gets only TZ, so none of its settings is in its memory.
//   - Recursion. goja's call stack is capped (Limits.MaxCallDepth), so deep
//     recursion ends the script ("Maximum call stack size exceeded", which
//     the script cannot catch) instead of growing the Go stack. For the
//     same reason nesting is capped where a built-in recurses over data
//     (join, JSON.stringify).
//   - Growth in a single step is refused before it happens, with an error
//     the script may catch: ArrayBuffer, DataView and the typed arrays are
//     removed (they allocate their whole length at once);
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
//     refused over Limits.MaxResultBytes; the Sandbox reads no more than
//     that (and its envelope) of what a worker writes.
//   - Panics. A panic in the worker becomes an error; a worker that dies
//     some other way fails its script, never the flow-runner.
//
// These bounds are documented for developers in docs/limits-and-errors.md
// "Headless flows".
package script

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Limits bound one run; Defaults fills in what is zero.
type Limits struct {
	// MaxCallDepth caps goja's call stack.
	MaxCallDepth int
	// MemoryBudget is how far the heap may grow during a run.
	MemoryBudget uint64
	// MemoryLimit is the hard cap on the memory a worker maps past what it
	// holds when it starts: the budget, the garbage not yet collected and
	// the Go runtime's own needs.
	MemoryLimit uint64
	// MaxStringLength bounds strings built by one built-in call, in UTF-16
	// code units (JavaScript's length).
	MaxStringLength int
	// MaxArrayLength bounds the array-likes one built-in call walks.
	MaxArrayLength int
	// MaxDepth bounds nesting for JSON.stringify and the result.
	MaxDepth int
	// MaxResultBytes bounds the result as JSON.
	MaxResultBytes int
}

// Defaults are the limits of a Sandbox built with zero Limits.
var Defaults = Limits{
	MaxCallDepth:    512,
	MemoryBudget:    32 << 20,
	MemoryLimit:     96 << 20,
	MaxStringLength: 1 << 20,
	MaxArrayLength:  1 << 17,
	MaxDepth:        64,
	MaxResultBytes:  1 << 20,
}

// Kind sorts a script's failures.
type Kind string

// The kinds of Error.
const (
	KindSyntax    Kind = "syntax"    // the code does not parse
	KindException Kind = "exception" // the script threw, built-in limits included
	KindTimeout   Kind = "timeout"   // it ran past its time limit
	KindMemory    Kind = "memory"    // it grew the heap past the budget, or its worker past its cap
	KindResult    Kind = "result"    // its result is too large or too deep
	KindCanceled  Kind = "canceled"  // ctx was cancelled first
	KindInternal  Kind = "internal"  // vars could not be copied in, or the sandbox failed
)

// Error is a script's failure, with a message fit for a node's error.
type Error struct {
	Kind    Kind   `json:"kind"`
	Message string `json:"message"`
	cause   error
}

func (e *Error) Error() string { return e.Message }

// Unwrap gives ctx's error for KindCanceled.
func (e *Error) Unwrap() error { return e.cause }

// idleWorkers is how many workers a Sandbox keeps started ahead, once it
// has run a script: enough for a burst of two without waiting for a
// process start, few enough to cost little memory when scripts are rare.
const idleWorkers = 2

// Sandbox runs scripts, each in a worker process of its own; it is safe
// for concurrent use. Close stops the workers it keeps started ahead.
type Sandbox struct {
	limits Limits
	// worker is the command line that starts a worker: this binary, the
	// command word and the limits; errWorker says why there is none.
	worker    []string
	errWorker error
	// reaped, when set (tests), hears of each run's worker once it has
	// been reaped, before Run returns.
	reaped func(pid int, state *os.ProcessState)

	mu       sync.Mutex
	idle     []*worker
	starting int
	closed   bool
	// starts are the starts in the background; closing ends them.
	starts  sync.WaitGroup
	closing context.Context
	close   context.CancelFunc
}

var _ run.Scripts = (*Sandbox)(nil)

// New returns a Sandbox bounded by l, Defaults where l is zero. It starts
// no process until the first script.
func New(l Limits) *Sandbox {
	d := Defaults
	orDefault(&d.MaxCallDepth, l.MaxCallDepth)
	orDefault(&d.MemoryBudget, l.MemoryBudget)
	orDefault(&d.MemoryLimit, l.MemoryLimit)
	orDefault(&d.MaxStringLength, l.MaxStringLength)
	orDefault(&d.MaxArrayLength, l.MaxArrayLength)
	orDefault(&d.MaxDepth, l.MaxDepth)
	orDefault(&d.MaxResultBytes, l.MaxResultBytes)
	s := &Sandbox{limits: d}
	s.closing, s.close = context.WithCancel(context.Background())
	self, err := os.Executable()
	if err != nil {
		s.errWorker = fmt.Errorf("the flow-runner cannot find its own binary: %w", err)
		return s
	}
	limits, err := json.Marshal(d)
	if err != nil {
		s.errWorker = err
		return s
	}
	s.worker = []string{self, WorkerCommand, string(limits)}
	return s
}

// orDefault sets *dst to v when v is set.
func orDefault[T int | uint64](dst *T, v T) {
	if v > 0 {
		*dst = v
	}
}

// Run runs code, a JavaScript function body, with vars readable as `vars`,
// and returns what it returns as JSON-like Go values (nil, bool, float64,
// string, []any, map[string]any). It stops the script at limit or when
// ctx ends, and returns once the script's worker is gone. A ctx that ends
// by its deadline counts as the time limit (the engine gives both). Every
// failure is an *Error.
func (s *Sandbox) Run(ctx context.Context, code string, vars map[string]any, limit time.Duration) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, stopped(ctx, limit)
	}
	if vars == nil {
		vars = map[string]any{}
	}
	varsJSON, err := marshal(vars)
	if err != nil {
		return nil, &Error{Kind: KindInternal, Message: "vars are not JSON-like: " + err.Error()}
	}
	req, err := marshal(request{Code: code, Vars: varsJSON, Limit: limit})
	if err != nil {
		return nil, &Error{Kind: KindInternal, Message: "script sandbox failed: " + err.Error()}
	}
	// The worker this script takes is replaced once it has run, so that
	// the replacement's start does not compete with the script.
	defer s.refill()
	w, err := s.take(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, stopped(ctx, limit)
		}
		return nil, &Error{Kind: KindInternal, Message: "script sandbox failed: " + err.Error()}
	}
	e := w.serve(ctx, req, limit, int64(s.limits.MaxResultBytes)+envelopeBytes)
	if s.reaped != nil {
		s.reaped(w.cmd.Process.Pid, e.state)
	}
	return s.outcome(ctx, limit, e)
}

// take returns a worker for one script: one started ahead, or a new one
// (unless ctx ends first).
func (s *Sandbox) take(ctx context.Context) (*worker, error) {
	if s.errWorker != nil {
		return nil, s.errWorker
	}
	s.mu.Lock()
	var w *worker
	if n := len(s.idle); n > 0 {
		w, s.idle = s.idle[n-1], s.idle[:n-1]
	}
	s.mu.Unlock()
	if w != nil {
		return w, nil
	}
	return startWorker(ctx, s.worker)
}

// refill starts workers in the background until idleWorkers are ready or
// starting, unless the Sandbox is closed or cannot start any.
func (s *Sandbox) refill() {
	if s.errWorker != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.closed && len(s.idle)+s.starting < idleWorkers {
		s.starting++
		s.starts.Add(1)
		go func() {
			defer s.starts.Done()
			w, err := startWorker(s.closing, s.worker)
			s.mu.Lock()
			s.starting--
			keep := err == nil && !s.closed
			if keep {
				s.idle = append(s.idle, w)
			}
			s.mu.Unlock()
			if err == nil && !keep {
				w.stop()
			}
		}()
	}
}

// Close stops and reaps the workers started ahead; a Run after it (a run
// that was under way when the service began to stop) starts its own. It
// always returns nil.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	s.closed = true
	idle := s.idle
	s.idle = nil
	s.mu.Unlock()
	s.close()
	for _, w := range idle {
		w.stop()
	}
	s.starts.Wait()
	return nil
}

// outcome turns how a worker ended into the run's value or *Error.
func (s *Sandbox) outcome(ctx context.Context, limit time.Duration, e ending) (any, error) {
	switch {
	case e.state == nil:
		return nil, &Error{Kind: KindInternal, Message: "script sandbox failed: its worker could not be waited for"}
	case e.why == stoppedAtLimit:
		return nil, timeout(limit)
	case e.why == stoppedByCtx:
		return nil, stopped(ctx, limit)
	case len(e.out) > s.limits.MaxResultBytes+envelopeBytes:
		return nil, &Error{Kind: KindResult, Message: fmt.Sprintf("script result is larger than %s as JSON", size(uint64(s.limits.MaxResultBytes)))}
	}
	if e.state.Success() {
		var r response
		if err := json.Unmarshal(e.out, &r); err != nil {
			return nil, &Error{Kind: KindInternal, Message: "script sandbox failed: its worker answered " + err.Error()}
		}
		if r.Error != nil {
			return nil, r.Error
		}
		var v any
		if len(r.Value) > 0 {
			if err := json.Unmarshal(r.Value, &v); err != nil {
				return nil, &Error{Kind: KindInternal, Message: "script sandbox failed: its worker answered " + err.Error()}
			}
		}
		return v, nil
	}
	switch {
	case e.outOfMemory():
		return nil, overBudget(s.limits.MemoryBudget)
	case e.outOfCPU(limit):
		return nil, timeout(limit)
	}
	return nil, &Error{Kind: KindInternal, Message: "script sandbox failed: its worker " + e.describe()}
}

// overBudget is the error of a script stopped for its memory: by the
// watchdog, or by its worker's cap.
func overBudget(budget uint64) *Error {
	return &Error{Kind: KindMemory, Message: fmt.Sprintf("script used more memory than its budget of %s", size(budget))}
}

func timeout(limit time.Duration) *Error {
	return &Error{Kind: KindTimeout, Message: fmt.Sprintf("script ran past its time limit of %s", limit)}
}

// stopped is the error of a run ctx ended: its time limit when ctx ended
// by its deadline, cancelled otherwise.
func stopped(ctx context.Context, limit time.Duration) *Error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return timeout(limit)
	}
	return &Error{Kind: KindCanceled, Message: "script stopped: " + err.Error(), cause: err}
}

// size writes a limit in MiB when it is whole MiB, as they are documented.
func size(n uint64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
