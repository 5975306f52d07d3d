package wait

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestForReturnsOnceTheCheckPasses(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	For(t, 5*time.Second, "third call", func() error {
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n := calls.Load(); n != 3 {
		t.Fatalf("check called %d times, want 3", n)
	}
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	go func() { time.Sleep(30 * time.Millisecond); close(done) }()
	Until(t, 5*time.Second, "done closed", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

// recorder is a testing.TB that keeps the failure instead of failing.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = format
	for _, a := range args {
		r.msg += " " + toString(a)
	}
	// Fatalf must not return, as the real one does not.
	panic(r)
}

func toString(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case error:
		return v.Error()
	case time.Duration:
		return v.String()
	}
	return ""
}

func TestForFailsWithWhatItWaitedForAndTheLastError(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("For did not fail: %v", p)
			}
		}()
		For(r, 50*time.Millisecond, "the answer", func() error { return errors.New("still 41") })
	}()
	if time.Since(start) < 50*time.Millisecond {
		t.Errorf("gave up after %s, before the deadline", time.Since(start))
	}
	for _, want := range []string{"the answer", "50ms", "still 41"} {
		if !strings.Contains(r.msg, want) {
			t.Errorf("failure %q does not mention %q", r.msg, want)
		}
	}
}

func TestPollReturnsTheLastErrorAfterWithin(t *testing.T) {
	t.Parallel()
	start := time.Now()
	calls := 0
	err := Poll(50*time.Millisecond, func() error { calls++; return fmt.Errorf("still %d", calls) })
	if time.Since(start) < 50*time.Millisecond {
		t.Errorf("gave up after %s, before the deadline", time.Since(start))
	}
	if err == nil || err.Error() != fmt.Sprintf("still %d", calls) {
		t.Errorf("Poll = %v after %d calls, want the last call's error", err, calls)
	}
	if err := Poll(time.Minute, func() error { return nil }); err != nil {
		t.Errorf("Poll of a check that passes = %v", err)
	}
}
