package script

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// request is what the Sandbox sends a worker on its stdin, which it then
// closes: one script.
type request struct {
	Code  string          `json:"code"`
	Vars  json.RawMessage `json:"vars"`
	Limit time.Duration   `json:"limit"`
}

// response is what a worker writes on its stdout before it exits: the
// script's value as JSON, or its failure.
type response struct {
	Value json.RawMessage `json:"value,omitempty"`
	Error *Error          `json:"error,omitempty"`
}

// workerReady is what a worker writes first, once it has bounded itself
// and made its runtime: it waits for its script.
const workerReady = "ready\n"

// startTimeout bounds a worker's start, to workerReady.
const startTimeout = 10 * time.Second

// marshal is v as JSON, with <, > and & as they are: what goes between
// the Sandbox and a worker is read by no HTML parser, and escaping would
// make it longer.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// envelopeBytes is what a response may hold besides the result: its keys,
// or an error's message (a thrown value's text is cut at maxThrownChars).
const envelopeBytes = 64 << 10

// stderrBytes is how much of a worker's stderr is kept: the Go runtime
// says why it died first ("fatal error: runtime: out of memory").
const stderrBytes = 4 << 10

// worker is one started worker process, waiting for its script on stdin.
type worker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *head
}

// startWorker starts the worker command line argv and waits until it is
// ready, startTimeout at most, or until ctx ends. Of the flow-runner's
// environment the worker gets only TZ, so that a script's dates are in
// the flow-runner's zone: its settings (its database's password, its
// provider's key) never reach a script's process.
func startWorker(ctx context.Context, argv []string) (*worker, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = workerEnv
	if tz, ok := os.LookupEnv("TZ"); ok {
		cmd.Env = append(slices.Clip(cmd.Env), "TZ="+tz)
	}
	cmd.Dir = "/"
	w := &worker{cmd: cmd, stderr: &head{max: stderrBytes}}
	cmd.Stderr = w.stderr
	var err error
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start a script worker: %w", err)
	}
	if w.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, fmt.Errorf("start a script worker: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a script worker: %w", err)
	}
	ready := make(chan bool, 1)
	go func() {
		said := make([]byte, len(workerReady))
		_, err := io.ReadFull(w.stdout, said)
		ready <- err == nil && string(said) == workerReady
	}()
	tooLong := time.NewTimer(startTimeout)
	defer tooLong.Stop()
	var ok bool
	select {
	case ok = <-ready:
	case <-tooLong.C:
	case <-ctx.Done():
	}
	if !ok {
		// Killed, the worker ends the read above, if it has not.
		w.stop()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e := ending{state: cmd.ProcessState, stderr: w.stderr.String()}
		return nil, fmt.Errorf("start a script worker: it %s", e.describe())
	}
	return w, nil
}

// Why the Sandbox killed a worker, if it did.
type stopReason int

const (
	notStopped stopReason = iota
	stoppedAtLimit
	stoppedByCtx
)

// ending is how a worker ended.
type ending struct {
	// out is what it wrote on stdout, up to one byte past what is read.
	out []byte
	// state is its exit status and resource use, once reaped.
	state *os.ProcessState
	why   stopReason
	// stderr is the start of what it wrote on stderr.
	stderr string
}

// serve hands w its script and waits for it to end: by itself, or killed
// at limit, when ctx ends, or as soon as it has written more than bound
// bytes. It returns once the process has been reaped.
func (w *worker) serve(ctx context.Context, req []byte, limit time.Duration, bound int64) ending {
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		// A worker that dies first makes this fail; how it ended says why.
		_, _ = w.stdin.Write(req)
		_ = w.stdin.Close()
	}()
	exited := make(chan ending, 1)
	go func() {
		out, _ := io.ReadAll(io.LimitReader(w.stdout, bound+1))
		if int64(len(out)) > bound {
			_ = w.cmd.Process.Kill()
		}
		// Wait reaps the process (and closes the pipes, which ends the
		// write above if the worker never read it).
		_ = w.cmd.Wait()
		exited <- ending{out: out, state: w.cmd.ProcessState}
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	var e ending
	why := notStopped
	select {
	case e = <-exited:
	case <-timer.C:
		why = stoppedAtLimit
	case <-ctx.Done():
		why = stoppedByCtx
	}
	if why != notStopped {
		_ = w.cmd.Process.Kill()
		e = <-exited
	}
	<-wrote
	e.why = why
	e.stderr = w.stderr.String()
	return e
}

// stop kills and reaps an idle worker.
func (w *worker) stop() {
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait()
}

// outOfMemory reports a worker that ended because the kernel refused it
// memory: it reached its cap. The Go runtime says so in words; the race
// detector's, in a worker built with -race, as ENOMEM's number.
func (e ending) outOfMemory() bool {
	for _, said := range []string{"out of memory", "cannot allocate memory", "(errno: 12)"} {
		if strings.Contains(e.stderr, said) {
			return true
		}
	}
	return false
}

// outOfCPU reports a worker the kernel killed at its RLIMIT_CPU.
func (e ending) outOfCPU(limit time.Duration) bool {
	ws, ok := e.state.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || (ws.Signal() != syscall.SIGKILL && ws.Signal() != syscall.SIGXCPU) {
		return false
	}
	return e.state.UserTime()+e.state.SystemTime() >= limit
}

// describe says how a worker ended, with the first line of its stderr.
func (e ending) describe() string {
	what := "ended"
	if e.state != nil {
		what += " (" + e.state.String() + ")"
	}
	if line, _, _ := strings.Cut(strings.TrimSpace(e.stderr), "\n"); line != "" {
		what += ": " + line
	}
	return what
}

// head keeps the first max bytes written to it and drops the rest, so
// that a worker can never block on its stderr nor fill the flow-runner's
// memory with it.
type head struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (h *head) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - h.buf.Len(); room > 0 {
		h.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (h *head) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.String()
}
