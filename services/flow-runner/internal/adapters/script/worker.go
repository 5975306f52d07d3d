package script

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dop251/goja"
)

// WorkerCommand is the command word that makes the flow-runner's binary a
// script worker: `flow-runner -script-worker <limits>`. It is shaped as a
// flag so that a test binary whose TestMain lacks RunWorkerIfAsked
// refuses it (the testing package's flag parser stops at a flag it does
// not know) instead of running its own tests again.
const WorkerCommand = "-script-worker"

// RunWorkerIfAsked, when this process was started as a script worker,
// runs its one script and exits; otherwise it returns at once. The
// flow-runner's main calls it first, and so does the TestMain of every
// test binary that runs scripts (the Sandbox starts its own binary).
func RunWorkerIfAsked() {
	if len(os.Args) < 2 || os.Args[1] != WorkerCommand {
		return
	}
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: "+WorkerCommand+" <limits as JSON>, a script on stdin")
		os.Exit(2)
	}
	os.Exit(work(os.Args[2], os.Stdin, os.Stdout))
}

// work is a worker's life: bound itself and prepare its runtime, say it
// is ready, then read its one script, run it and write the response.
func work(limits string, in io.Reader, out io.Writer) int {
	// One core: a script is one goroutine, and its time limit then bounds
	// the CPU it uses. No goroutine dump on a fatal error: the Sandbox
	// reads only its first line.
	runtime.GOMAXPROCS(1)
	debug.SetTraceback("none")
	var h *hardening
	r := recovered(func() (r response) {
		h, r = prepare(limits)
		return r
	})
	if _, err := io.WriteString(out, workerReady); err != nil {
		return 1
	}
	if r.Error == nil {
		r = recovered(func() response { return serveOne(h, in) })
	}
	b, err := marshal(r)
	if err != nil {
		return 1
	}
	if _, err := out.Write(b); err != nil {
		return 1
	}
	return 0
}

// recovered is f's response, or the error of its panic.
func recovered(f func() response) (r response) {
	defer func() {
		if p := recover(); p != nil {
			r = failed("script sandbox failed: %v", p)
		}
	}()
	return f()
}

// prepare bounds the process and makes the runtime with its built-ins
// bounded, while the worker waits for its script, so that the script does
// not wait for them. A failure is in the response.
func prepare(limitsJSON string) (*hardening, response) {
	var l Limits
	if err := json.Unmarshal([]byte(limitsJSON), &l); err != nil {
		return nil, failed("script sandbox failed: its limits: %s", err)
	}
	if err := boundMemory(l.MemoryLimit); err != nil {
		return nil, failed("script sandbox failed: its worker cannot bound its memory: %s", err)
	}
	vm := goja.New()
	vm.SetMaxCallStackSize(l.MaxCallDepth)
	h := newHardening(vm, l)
	if err := h.install(); err != nil {
		return nil, failed("script sandbox failed: %s", err)
	}
	return h, response{}
}

// serveOne reads the one script, bounds the process's CPU time by its
// limit, and runs it.
func serveOne(h *hardening, in io.Reader) response {
	body, err := io.ReadAll(in)
	if err != nil {
		return failed("script sandbox failed: reading the script: %s", err)
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return failed("script sandbox failed: reading the script: %s", err)
	}
	if err := boundCPU(req.Limit); err != nil {
		return failed("script sandbox failed: its worker cannot bound its time: %s", err)
	}
	v, serr := execute(h, req.Code, string(req.Vars))
	if serr != nil {
		return response{Error: serr}
	}
	return response{Value: v}
}

func failed(format string, a ...any) response {
	return response{Error: &Error{Kind: KindInternal, Message: fmt.Sprintf(format, a...)}}
}

// boundMemory caps the process's writable private memory (RLIMIT_DATA,
// which counts what Go's runtime maps for use, not the address space it
// only reserves) at what it holds now plus limit, and has the runtime
// collect hard before it reaches the cap. It also keeps a dying worker
// from writing a core file, and offers it first to the kernel's OOM
// killer should the machine itself run short.
func boundMemory(limit uint64) error {
	data, err := dataBytes()
	if err != nil {
		return err
	}
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_DATA, &cur); err != nil {
		return err
	}
	ceiling := min(data+limit+raceHeadroom(limit), cur.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: ceiling, Max: ceiling}); err != nil {
		return err
	}
	// The runtime's count of its memory is not the kernel's (the kernel
	// also counts what the runtime has given back but still maps): a
	// quarter of the cap is left between the two.
	debug.SetMemoryLimit(int64(runtimeBytes() + limit - limit/4))
	if err := syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{}); err != nil {
		return err
	}
	// Raising one's own score needs no privilege; where /proc is not
	// writable the cap above still holds.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	return nil
}

// boundCPU has the kernel kill the process once it has used limit more
// CPU time, rounded up to whole seconds (RLIMIT_CPU, whose soft limit is
// the hard one, so the signal is SIGKILL). The Sandbox kills the worker
// at limit itself; this holds should it be unable to.
func boundCPU(limit time.Duration) error {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return err
	}
	used := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	secs := uint64(max(1, math.Ceil((used + max(limit, 0)).Seconds())))
	return syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: secs, Max: secs})
}

// dataBytes is the process's writable private memory as the kernel
// counts it against RLIMIT_DATA (VmData).
func dataBytes() (uint64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmData:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmData: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmData in /proc/self/status")
}

// runtimeBytes is the memory the Go runtime counts against its memory
// limit.
func runtimeBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// execute compiles code as the body of function(vars), calls it and
// returns the result as JSON, all inside h's runtime, under the memory
// watchdog.
func execute(h *hardening, code, varsJSON string) (json.RawMessage, *Error) {
	// vars is parsed by JSON.parse as it was before the built-ins were
	// bounded, and before the budget is counted: it may be larger than a
	// script may build, and it is ours.
	vars, err := h.parse(varsJSON)
	if err != nil {
		return nil, describe(h.l, err)
	}
	stop := watchMemory(h.vm, h.l.MemoryBudget)
	defer stop()
	fn, err := h.compile(code)
	if err != nil {
		return nil, describe(h.l, err)
	}
	ret, err := fn(goja.Undefined(), vars)
	if err != nil {
		return nil, describe(h.l, h.exception(err))
	}
	v, err := h.export(ret)
	if err != nil {
		return nil, describe(h.l, h.exception(err))
	}
	return v, nil
}

// interruptMemory is passed to vm.Interrupt when the heap outgrows the
// budget.
type interruptMemory struct{}

// watchMemory interrupts vm when the heap grows past budget: by more than
// budget live (after a GC), or by twice it at all. This catches growth one
// instruction at a time (string doubling, arrays filled in a loop) with a
// clear error before the worker's hard cap ends it. The returned func
// stops watching.
func watchMemory(vm *goja.Runtime, budget uint64) func() {
	stopped := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
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
			case over := <-confirmed:
				gcRunning = false
				if over {
					vm.Interrupt(interruptMemory{})
					return
				}
			case <-tick.C:
				heap := heapBytes()
				if heap < base+budget {
					continue
				}
				// The heap counts garbage until a GC sweeps it: between
				// one and two budgets, only live growth stops the script;
				// past two, it stops at once. A GC at most every 50 ms
				// keeps a churning script from collecting nonstop.
				if heap >= base+2*budget {
					vm.Interrupt(interruptMemory{})
					return
				}
				if gcRunning || time.Since(lastGC) < 50*time.Millisecond {
					continue
				}
				gcRunning, lastGC = true, time.Now()
				go func() {
					runtime.GC()
					confirmed <- heapBytes() >= base+budget
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

// describe turns what a run ended with into an *Error.
func describe(l Limits, err error) *Error {
	var se *Error
	if errors.As(err, &se) {
		return se
	}
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		if _, ok := ie.Value().(interruptMemory); ok {
			return overBudget(l.MemoryBudget)
		}
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		return &Error{Kind: KindException, Message: "script threw: RangeError: Maximum call stack size exceeded"}
	}
	return &Error{Kind: KindInternal, Message: "script failed: " + err.Error()}
}
