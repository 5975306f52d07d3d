package script

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A regular expression that backtracks catastrophically (each added
// character doubles its work: at 40, hours of CPU) runs inside one
// built-in call, which no interrupt reaches. It ends with its run all the
// same: its worker is killed at the time limit and reaped before Run
// returns, so none of its CPU outlives the answer.
func TestRunawayRegexpEndsWithItsRun(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, Limits{})
	last := watchWorkers(t, s)
	const limit = 500 * time.Millisecond
	_, err, took := try(t, s, `return /^(a+)+\1(?=b)$/.test('a'.repeat(40) + 'c')`, nil, limit)
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindTimeout || se.Message != "script ran past its time limit of 500ms" {
		t.Fatalf("Run = %v, want its time limit", err)
	}
	w := last()
	if !gone(w.pid) {
		t.Errorf("Run returned after %s with its worker %d still there", took, w.pid)
	}
	// Killed at the limit: the CPU it used is about the limit, never the
	// hours the expression asks for.
	if cpu := w.state.UserTime() + w.state.SystemTime(); cpu > limit+2*time.Second {
		t.Errorf("the worker used %s of CPU for a %s limit", cpu, limit)
	}
	if took > limit+3*time.Second {
		t.Errorf("a %s limit took %s", limit, took)
	}
}

// The engine gives a script a ctx whose deadline is its time limit: when
// the ctx ends first, the error is still the time limit's, never
// "context deadline exceeded".
func TestDeadlineIsTheTimeLimit(t *testing.T) {
	t.Parallel()
	// A worker ready before the ctx starts: a start slower than the ctx
	// would end the run before any worker ran, with the same error and
	// nothing to reap.
	s := startedAhead(t, Limits{})
	last := watchWorkers(t, s)
	const limit = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	_, err := s.Run(ctx, `for (;;) {}`, nil, limit)
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindTimeout || se.Message != "script ran past its time limit of 300ms" {
		t.Fatalf("Run = %v, want its time limit", err)
	}
	if w := last(); !gone(w.pid) {
		t.Errorf("Run returned with its worker %d still there", w.pid)
	}
	// A ctx already past its deadline says the same.
	if _, err := s.Run(ctx, `return 1`, nil, limit); err == nil || err.Error() != "script ran past its time limit of 300ms" {
		t.Errorf("Run with an expired ctx = %v", err)
	}
}

// What the flow-runner reads of a worker is bounded: a worker that writes
// without end is killed once it has written more than a result may be,
// and one that fills its stderr and dies is reported by its first line.
func TestWorkerOutputIsBounded(t *testing.T) {
	t.Parallel()
	s := standInSandbox(t, floodStdout)
	last := watchWorkers(t, s)
	_, err, _ := try(t, s, `return 1`, nil, time.Minute)
	var se *Error
	// Stopped for its size, long before its time limit.
	if !errors.As(err, &se) || se.Kind != KindResult || se.Message != "script result is larger than 1 MiB as JSON" {
		t.Errorf("a worker flooding its stdout: %v", err)
	}
	if w := last(); !gone(w.pid) {
		t.Errorf("Run returned with the flooding worker %d still there", w.pid)
	}

	s = standInSandbox(t, dieLoudly)
	_, err, _ = try(t, s, `return 1`, nil, time.Minute)
	if !errors.As(err, &se) || se.Kind != KindInternal ||
		se.Message != "script sandbox failed: its worker ended (exit status 3): fatal error: the stand-in dies" {
		t.Errorf("a worker dying loudly: %v", err)
	}
	if strings.Contains(err.Error(), "yyyy") {
		t.Errorf("the error holds more than the worker's first line: %.200s", err)
	}
}

// A worker serves one script: two runs in a row have two processes, so
// nothing one script leaves in its runtime reaches the next.
func TestAWorkerServesOneScript(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, Limits{})
	last := watchWorkers(t, s)
	if _, err, _ := try(t, s, `globalThis.left = "behind"; return 1`, nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	first := last().pid
	got, err, _ := try(t, s, `return typeof left`, nil, 5*time.Second)
	if err != nil || got != "undefined" {
		t.Errorf("the second script sees %v, %v", got, err)
	}
	if second := last().pid; second == first {
		t.Errorf("both scripts ran in worker %d", first)
	}
}

// A worker that never gets ready costs its run no more than the run's
// time: the start is given up when ctx ends, as the script would be.
func TestAWorkerThatNeverStartsIsGivenUp(t *testing.T) {
	t.Parallel()
	s := standInSandbox(t, neverReady)
	const limit = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	_, err := s.Run(ctx, `return 1`, nil, limit)
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindTimeout || se.Message != "script ran past its time limit of 300ms" {
		t.Errorf("Run = %v, want its time limit", err)
	}
	if took := time.Since(start); took > startTimeout/2 {
		t.Errorf("Run waited %s for a worker that never got ready", took)
	}
}
