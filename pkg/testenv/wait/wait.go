// Package wait polls a condition in a test until it holds or a deadline
// passes. Tests of asynchronous work (a consumer, a relay, a delivery) use
// it instead of sleeping a fixed time, so they are as fast as the system and
// still fail with what they were waiting for.
package wait

import (
	"errors"
	"testing"
	"time"
)

// Interval is how long For sleeps between checks: short, because the
// things waited for usually take milliseconds, and every test waits on it.
const Interval = 10 * time.Millisecond

// For calls check until it returns nil, and fails t (naming what, the time
// allowed and check's last error) if it has not by the end of within.
func For(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	if err := Poll(within, check); err != nil {
		t.Fatalf("%s: not within %s: %v", what, within, err)
	}
}

// Poll calls check until it returns nil, and returns check's last error if
// it has not by the end of within: For for a test that expects the wait
// may be in vain and says what that means itself.
func Poll(within time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(Interval)
	}
}

// errFalse is the last error of a condition Until waited for in vain.
var errFalse = errors.New("condition still false")

// Until is For for a condition with no reason to tell.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	For(t, within, what, func() error {
		if cond() {
			return nil
		}
		return errFalse
	})
}
