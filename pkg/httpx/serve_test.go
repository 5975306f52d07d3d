package httpx_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// served starts Serve with grace on a free port, serving /slow, which
// waits for release, and /ok; it returns the address, the stop and Serve's
// result.
func served(t *testing.T, grace time.Duration, entered chan<- struct{}, release <-chan struct{}) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	e := httpx.NewEcho(zap.NewNop())
	e.GET("/slow", func(c echo.Context) error {
		entered <- struct{}{}
		<-release
		return c.String(http.StatusOK, "done")
	})
	e.GET("/ok", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	addr := ports.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	result := make(chan error, 1)
	go func() { result <- httpx.Serve(ctx, httpx.NewServer(addr, e, time.Minute), grace) }()
	wait.For(t, 10*time.Second, "listening", func() error {
		resp, err := http.Get("http://" + addr + "/ok")
		if err != nil {
			return err
		}
		return resp.Body.Close()
	})
	return addr, cancel, result
}

// get fetches url in the background and sends its body or error.
func get(url string) <-chan error {
	answer := make(chan error, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			answer <- err
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && string(body) != "done" {
			err = errors.New("answered " + string(body))
		}
		answer <- err
	}()
	return answer
}

// A request in flight when the server is told to stop is answered when it
// finishes within the grace, and Serve returns cleanly after it.
func TestServeLetsRequestsInFlightFinishWithinTheGrace(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	addr, stop, result := served(t, time.Minute, entered, release)
	answer := get("http://" + addr + "/slow")
	<-entered
	stop()
	select {
	case err := <-result:
		t.Fatalf("Serve returned (%v) with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-answer; err != nil {
		t.Fatalf("the request in flight: %v", err)
	}
	if err := <-result; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// A request still in flight when the grace ends is cut: its connection is
// closed and Serve says so, rather than leaving it open behind a process
// that goes on closing its connections.
func TestServeCutsRequestsPastTheGrace(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	addr, stop, result := served(t, 200*time.Millisecond, entered, release)
	answer := get("http://" + addr + "/slow")
	<-entered
	stop()
	if err := <-result; err == nil {
		t.Fatal("Serve returned no error though a request was cut")
	}
	select {
	case err := <-answer:
		if err == nil {
			t.Fatal("the cut request was answered")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cut request's connection stayed open")
	}
}
