package testenv_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv"
)

func TestServeStopsOnceAndCancels(t *testing.T) {
	t.Parallel()
	var stopped atomic.Int32
	bg := testenv.Serve(t, "svc", func(ctx context.Context) error {
		<-ctx.Done()
		stopped.Add(1)
		return nil
	})
	bg.Early() // still running: no failure
	bg.Stop()
	bg.Stop()
	if stopped.Load() != 1 {
		t.Fatalf("serve returned %d times", stopped.Load())
	}
}

// fakeTB records failures instead of failing the real test.
type fakeTB struct {
	testing.TB
	failed atomic.Bool
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Cleanup(func())        {}
func (f *fakeTB) Errorf(string, ...any) { f.failed.Store(true) }
func (f *fakeTB) Fatalf(string, ...any) { f.failed.Store(true) }

func TestServeReportsAnError(t *testing.T) {
	t.Parallel()
	tb := &fakeTB{TB: t}
	bg := testenv.Serve(tb, "svc", func(ctx context.Context) error {
		<-ctx.Done()
		return errors.New("shutdown failed")
	})
	bg.Stop()
	if !tb.failed.Load() {
		t.Fatal("a serve error was not reported")
	}
}

// WaitReady returns once /readyz answers 200, not before.
func TestWaitReady(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	bg := testenv.Serve(t, "svc", func(ctx context.Context) error { <-ctx.Done(); return nil })
	bg.WaitReady(srv.URL, 10*time.Second)
	if calls.Load() != 3 {
		t.Fatalf("ready after %d calls, want the third", calls.Load())
	}
}
