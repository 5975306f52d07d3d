package script

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/wait"
)

func try(t *testing.T, s *Sandbox, code string, vars map[string]any, limit time.Duration) (any, error, time.Duration) {
	t.Helper()
	start := time.Now()
	v, err := s.Run(context.Background(), code, vars, limit)
	return v, err, time.Since(start)
}

// newSandbox is New(l), its workers stopped when the test ends.
func newSandbox(t testing.TB, l Limits) *Sandbox {
	t.Helper()
	s := New(l)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// startedAhead is newSandbox with its workers started ahead and ready:
// its first script has it start them, and the next one takes a worker at
// once, however slow a start is on a loaded machine.
func startedAhead(t testing.TB, l Limits) *Sandbox {
	t.Helper()
	s := newSandbox(t, l)
	if _, err := s.Run(context.Background(), `return 1`, nil, 10*time.Second); err != nil {
		t.Fatalf("the first script: %v", err)
	}
	wait.Until(t, 10*time.Second, "workers started ahead", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.idle) == idleWorkers
	})
	return s
}

// reapedWorker is a run's worker as the Sandbox reaped it.
type reapedWorker struct {
	pid   int
	state *os.ProcessState
}

// watchWorkers records the workers of s's runs once reaped (before their
// Run returns); last returns the latest.
func watchWorkers(t testing.TB, s *Sandbox) (last func() reapedWorker) {
	var mu sync.Mutex
	var seen []reapedWorker
	s.reaped = func(pid int, state *os.ProcessState) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, reapedWorker{pid, state})
	}
	return func() reapedWorker {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			t.Fatal("no worker was reaped")
		}
		return seen[len(seen)-1]
	}
}

// gone reports whether no process has pid any more: reaped, not even a
// zombie.
func gone(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return errors.Is(err, fs.ErrNotExist)
}

func TestRunReturnsJSONLikeValues(t *testing.T) {
	t.Parallel()
	vars := map[string]any{"name": "Ada", "n": 2, "order": map[string]any{"items": []any{"a", "b"}}}
	tests := []struct {
		name string
		code string
		want any
	}{
		{name: "number", code: `return vars.n * 21`, want: 42.0},
		{name: "string", code: `return "hi " + vars.name`, want: "hi Ada"},
		{name: "bool", code: `return vars.order.items.length === 2`, want: true},
		{name: "null", code: `return null`, want: nil},
		{name: "undefined", code: `return undefined`, want: nil},
		{name: "no return", code: `var x = 1`, want: nil},
		{name: "array", code: `return vars.order.items.map(function (s) { return s.toUpperCase() })`, want: []any{"A", "B"}},
		{name: "array at the bound", code: `return new Array(131072).fill(0).length`, want: 131072.0},
		{name: "object", code: `return {who: vars.name, count: vars.order.items.length, nested: {ok: true}}`, want: map[string]any{"who": "Ada", "count": 2.0, "nested": map[string]any{"ok": true}}},
		{name: "functions and undefined dropped, NaN null", code: `return {f: function () {}, u: undefined, n: NaN, d: new Date(0)}`, want: map[string]any{"n": nil, "d": "1970-01-01T00:00:00.000Z"}},
		{name: "a function", code: `return function () {}`, want: nil},
		{name: "missing vars read as undefined", code: `return typeof vars.nope`, want: "undefined"},
		{name: "caught exception", code: `try { null.x } catch (e) { return e.name }`, want: "TypeError"},
	}
	s := newSandbox(t, Limits{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err, _ := try(t, s, tt.code, vars, 5*time.Second)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Run(%s) = %#v, %v; want %#v", tt.code, got, err, tt.want)
			}
		})
	}
}

// vars is a copy: the script may change it, and nothing reaches the
// caller's map.
func TestVarsAreNotWrittenBack(t *testing.T) {
	t.Parallel()
	vars := map[string]any{"a": 1, "nested": map[string]any{"b": []any{1, 2}}}
	got, err, _ := try(t, newSandbox(t, Limits{}), `
		vars.a = 99; vars.added = true; vars.nested.b.push(3); delete vars.nested;
		vars = null;
		return "changed"`, vars, 5*time.Second)
	if err != nil || got != "changed" {
		t.Fatalf("Run = %v, %v", got, err)
	}
	want := map[string]any{"a": 1, "nested": map[string]any{"b": []any{1, 2}}}
	if !reflect.DeepEqual(vars, want) {
		t.Fatalf("vars after the run: %v", vars)
	}
}

// Only ECMAScript's own globals are there: no require, console, timers,
// fetch, nothing from Go, and no buffers that allocate at once.
func TestNothingButTheLanguage(t *testing.T) {
	t.Parallel()
	got, err, _ := try(t, newSandbox(t, Limits{}), `return Object.getOwnPropertyNames(globalThis).sort()`, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(`AggregateError Array BigInt Boolean Date Error EvalError Function Infinity JSON Map Math NaN
		Number Object Promise Proxy RangeError ReferenceError Reflect RegExp Set String Symbol SyntaxError TypeError
		URIError WeakMap WeakSet decodeURI decodeURIComponent encodeURI encodeURIComponent escape eval globalThis
		isFinite isNaN parseFloat parseInt undefined unescape`)
	names := make([]string, 0, len(want))
	for _, n := range got.([]any) {
		names = append(names, n.(string))
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("globals %v\nwant      %v", names, want)
	}
}

func TestRunFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		code     string
		wantKind Kind
		wantMsg  string
	}{
		{name: "syntax error", code: "var a = 1;\nreturn (", wantKind: KindSyntax, wantMsg: "syntax error: Line 3:1 Unexpected token }"},
		{name: "thrown error", code: "var x = 1;\nthrow new Error('boom')", wantKind: KindException, wantMsg: "script threw: Error: boom (line 2)"},
		{name: "thrown value", code: `throw "plain"`, wantKind: KindException, wantMsg: "script threw: plain"},
		{name: "type error", code: `return vars.nope.deeper`, wantKind: KindException, wantMsg: "script threw: TypeError: Cannot read property 'deeper' of undefined"},
		{name: "thrown value whose text throws", code: `throw {toString: function () { throw 1 }}`, wantKind: KindException, wantMsg: "script threw: a value that cannot be shown as text"},
		{name: "thrown value whose text loops", code: `throw {toString: function () { for (;;) {} }}`, wantKind: KindTimeout, wantMsg: "time limit"},
		{name: "long thrown text cut", code: `throw "x".repeat(1e5)`, wantKind: KindException, wantMsg: "xxx…"},
		{name: "deep recursion", code: `function f(n) { return f(n + 1) } return f(0)`, wantKind: KindException, wantMsg: "Maximum call stack size exceeded"},
		{name: "recursion through a built-in", code: `function f() { return [1].map(f) } return f()`, wantKind: KindException, wantMsg: "Maximum call stack size exceeded"},
		{name: "recursion cannot be caught", code: `function f() { try { return f() } catch (e) { return f() } } return f()`, wantKind: KindException, wantMsg: "Maximum call stack size exceeded"},
		{name: "huge repeat", code: `return "x".repeat(1e9)`, wantKind: KindException, wantMsg: "RangeError: a string of 1000000000 characters is longer than the 1048576"},
		{name: "huge pad", code: `return "x".padEnd(2e9)`, wantKind: KindException, wantMsg: "longer than the 1048576"},
		{name: "replace blowing up", code: `var s = "x".repeat(1e5); return s.replaceAll("", s)`, wantKind: KindException, wantMsg: "longer than the 1048576"},
		{name: "replace function blowing up", code: `var s = "x".repeat(2e4); return s.replaceAll("x", function () { return s })`, wantKind: KindException, wantMsg: "longer than the 1048576"},
		{name: "huge sparse array filled", code: `return new Array(1e9).fill(0)`, wantKind: KindException, wantMsg: "an array of 1000000000 elements is longer than the 131072"},
		{name: "huge array joined", code: `var a = []; a.length = 4294967295; return a.join("x")`, wantKind: KindException, wantMsg: "longer than the 131072"},
		{name: "array of big strings joined", code: `var s = "x".repeat(1e6); return [s, s, s].join()`, wantKind: KindException, wantMsg: "longer than the 1048576"},
		{name: "huge array-like applied", code: `return Math.max.apply(null, {length: 1e9})`, wantKind: KindException, wantMsg: "longer than the 131072"},
		{name: "huge array-like from", code: `return Array.from({length: 1e9})`, wantKind: KindException, wantMsg: "longer than the 131072"},
		{name: "huge spread", code: `return [...new Array(1e9)]`, wantKind: KindException, wantMsg: "longer than the 131072"},
		{name: "buffers removed", code: `return new ArrayBuffer(1e9)`, wantKind: KindException, wantMsg: "ReferenceError: ArrayBuffer is not defined"},
		{name: "deep JSON", code: `var o = []; for (var i = 0; i < 1e4; i++) o = [o]; return JSON.stringify(o)`, wantKind: KindException, wantMsg: "RangeError: JSON.stringify: the value is nested deeper than 64 levels"},
		{name: "wide JSON", code: `return JSON.stringify(new Array(131073))`, wantKind: KindException, wantMsg: "RangeError: JSON.stringify: the value holds more than 131072 values"},
		{name: "array past the bound", code: `return new Array(131073).fill(0).length`, wantKind: KindException, wantMsg: "RangeError: an array of 131073 elements is longer than the 131072 the sandbox allows in one call"},
		{name: "deep join", code: `var o = []; for (var i = 0; i < 1e4; i++) o = [o]; return String(o)`, wantKind: KindException, wantMsg: "RangeError: arrays nested deeper than 64 cannot be joined in the sandbox"},
		{name: "deep result", code: `var o = {}; for (var i = 0; i < 100; i++) o = {o: o}; return o`, wantKind: KindResult, wantMsg: "script result is nested deeper than 64 levels"},
		{name: "large result", code: `var a = []; for (var i = 0; i < 20; i++) a.push("x".repeat(1e5)); return a`, wantKind: KindResult, wantMsg: "script result is larger than 1 MiB as JSON"},
		{name: "no require", code: `return require("fs")`, wantKind: KindException, wantMsg: "ReferenceError: require is not defined"},
		{name: "no timers", code: `setTimeout(function () {}, 1)`, wantKind: KindException, wantMsg: "ReferenceError: setTimeout is not defined"},
		{name: "no escape from the function", code: `}); (function () {`, wantKind: KindSyntax, wantMsg: "syntax error: the code closes its function early"},
		{name: "no escape, as one expression", code: `}, function () {`, wantKind: KindSyntax, wantMsg: "syntax error: the code closes its function early"},
	}
	s := newSandbox(t, Limits{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Generous: the cases run in parallel, under -race, on a
			// shared machine; only the looping ones take it all.
			got, err, took := try(t, s, tt.code, nil, 5*time.Second)
			var se *Error
			if !errors.As(err, &se) || se.Kind != tt.wantKind || !strings.Contains(se.Message, tt.wantMsg) {
				t.Fatalf("Run(%s) = %v, %v; want %s %q", tt.code, got, err, tt.wantKind, tt.wantMsg)
			}
			if strings.Contains(se.Message, "github.com/") {
				t.Errorf("the message shows the sandbox's Go frames: %s", se.Message)
			}
			if took > 15*time.Second {
				t.Errorf("took %s", took)
			}
		})
	}
}

// An endless loop is stopped at the limit, and so is a script whose ctx
// ends first; either way its worker is gone before Run returns.
func TestRunIsInterrupted(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, Limits{})
	last := watchWorkers(t, s)
	for _, code := range []string{`for (;;) {}`, `while (true) { try { for (;;) {} } catch (e) {} }`} {
		_, err, took := try(t, s, code, nil, 200*time.Millisecond)
		var se *Error
		if !errors.As(err, &se) || se.Kind != KindTimeout || se.Message != "script ran past its time limit of 200ms" {
			t.Errorf("Run(%s) = %v", code, err)
		}
		if took > 3*time.Second {
			t.Errorf("Run(%s): a 200ms limit took %s", code, took)
		}
		if w := last(); !gone(w.pid) {
			t.Errorf("Run(%s) returned with its worker %d still there", code, w.pid)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := s.Run(ctx, `for (;;) {}`, nil, time.Minute)
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindCanceled || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a cancelled run took %s", took)
	}
	if w := last(); !gone(w.pid) {
		t.Errorf("a cancelled run returned with its worker %d still there", w.pid)
	}
	if _, err := s.Run(ctx, `return 1`, nil, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("run with an ended ctx: %v", err)
	}
}

// Growth one instruction at a time (a doubling string, an array of
// strings, an object of objects) ends with the memory error, inside the
// worker: the worker's resident memory stays under its cap, and the
// flow-runner's heap does not grow. With a budget the watchdog never
// reaches, the cap alone ends it, with the same error. Not parallel: the
// heap measured is the test process's.
func TestRunIsBoundedInMemory(t *testing.T) {
	// The heap's peak during the runs, against what it was before them.
	runtime.GC()
	base := heapBytes()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				if h := heapBytes(); h > peak.Load() {
					peak.Store(h)
				}
			}
		}
	}()
	defer func() {
		close(stop)
		<-sampled
		// What the Sandbox reads of a worker is bounded by the result's
		// bound, unused here.
		if grew := peak.Load() - min(base, peak.Load()); grew > 8<<20 {
			t.Errorf("the flow-runner's heap grew by %d MiB at its peak", grew>>20)
		} else {
			t.Logf("the flow-runner's heap grew by %d MiB at its peak", grew>>20)
		}
	}()

	const budget = 32 << 20
	for _, tt := range []struct {
		name   string
		limits Limits
		code   string
	}{
		{"doubling string", Limits{MemoryBudget: budget}, `var s = "x"; for (;;) s += s`},
		{"array filled in a loop", Limits{MemoryBudget: budget}, `var a = []; for (var i = 0; ; i++) a[i] = "x".repeat(4096) + i`},
		{"object of objects", Limits{MemoryBudget: budget}, `var o = {}; for (var i = 0; ; i++) o["k" + i] = {v: [i, i, i]}`},
		{"doubling string, the cap alone", Limits{MemoryBudget: 1 << 40}, `var s = "x"; for (;;) s += s`},
	} {
		s := newSandbox(t, tt.limits)
		last := watchWorkers(t, s)
		// What a worker holds once it has run a script that allocates
		// nothing, as the kernel counts it: its resident peak includes
		// the start of the process that became it.
		if _, err, _ := try(t, s, `return 1`, nil, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		started := maxRSS(last().state)
		_, err, took := try(t, s, tt.code, nil, 30*time.Second)
		t.Logf("%s: %v after %s", tt.name, err, took)
		var se *Error
		if !errors.As(err, &se) || se.Kind != KindMemory {
			t.Errorf("%s: Run = %v (after %s), want stopped for memory", tt.name, err, took)
			continue
		}
		if want := fmt.Sprintf("script used more memory than its budget of %s", size(s.limits.MemoryBudget)); se.Message != want {
			t.Errorf("%s: %q, want %q", tt.name, se.Message, want)
		}
		// The cap is on writable memory past the start; resident memory
		// may also hold pages the worker had mapped at its start and
		// touched later, and its binary's code: 32 MiB for those.
		ceiling := started + s.limits.MemoryLimit + raceHeadroom(s.limits.MemoryLimit) + 32<<20
		if peak := maxRSS(last().state); peak > ceiling {
			t.Errorf("%s: the worker's resident memory peaked at %d MiB, over %d MiB", tt.name, peak>>20, ceiling>>20)
		} else {
			t.Logf("%s: the worker's resident memory peaked at %d MiB (%d MiB at its start; at most %d MiB)", tt.name, peak>>20, started>>20, ceiling>>20)
		}
	}
	// A script well within the budget runs to its end.
	s := newSandbox(t, Limits{MemoryBudget: budget})
	got, err, _ := try(t, s, `var a = []; for (var i = 0; i < 6000; i++) a.push("x".repeat(4096) + i); return a.length`, nil, 30*time.Second)
	if err != nil || got != 6000.0 {
		t.Errorf("a script of 24 MiB: %v, %v", got, err)
	}
}

// maxRSS is a reaped process's resident peak, in bytes.
func maxRSS(state *os.ProcessState) uint64 {
	return uint64(state.SysUsage().(*syscall.Rusage).Maxrss) << 10
}
