package testenv

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// StopWithin is how long Background's Stop waits for a service to return.
const StopWithin = 30 * time.Second

// Background is a service's serve loop running on its own goroutine in a
// test, the way main runs it, until Stop or the end of the test.
type Background struct {
	t      testing.TB
	what   string
	cancel context.CancelFunc
	exited chan struct{}
	err    error // serve's result, set before exited closes
	once   sync.Once
}

// Serve starts serve(ctx) and registers its Stop with t.Cleanup.
func Serve(t testing.TB, what string, serve func(ctx context.Context) error) *Background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &Background{t: t, what: what, cancel: cancel, exited: make(chan struct{})}
	go func() {
		b.err = serve(ctx)
		close(b.exited)
	}()
	t.Cleanup(b.Stop)
	return b
}

// Early fails the test when serve has already returned: for a readiness
// wait, so a service that died at start is named at once rather than after
// the wait runs out.
func (b *Background) Early() {
	b.t.Helper()
	select {
	case <-b.exited:
		b.t.Fatalf("%s returned early: %v", b.what, b.err)
	default:
	}
}

// WaitReady waits until base's /readyz answers 200 (the service's
// connections work), failing the test at once when serve returns first.
func (b *Background) WaitReady(base string, within time.Duration) {
	b.t.Helper()
	wait.For(b.t, within, b.what+" ready", func() error {
		b.Early()
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz %d", resp.StatusCode)
		}
		return nil
	})
}

// Stop cancels serve and waits for it to return, failing the test when it
// returns an error or does not return within StopWithin. Only the first
// call does anything.
func (b *Background) Stop() {
	b.once.Do(func() {
		b.cancel()
		select {
		case <-b.exited:
			if b.err != nil {
				b.t.Errorf("%s: serve: %v", b.what, b.err)
			}
		case <-time.After(StopWithin):
			b.t.Errorf("%s did not stop within %s", b.what, StopWithin)
		}
	})
}
