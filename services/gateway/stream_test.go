package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv/sse"
	gwconfig "github.com/parleyhq/parley/services/gateway/internal/config"
)

func runEvent(i int) string { return fmt.Sprintf("event: node\ndata: {\"step\":%d}\n\n", i) }

// openRun starts POST /v1/flows/f1/invoke as an API client does and returns
// the response with its body unread. The client gives up after 20 s, so a
// gateway that buffered the stream fails the test instead of hanging it.
func (h *harness) openRun(t *testing.T, ctx context.Context, key string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/flows/f1/invoke", strings.NewReader(`{"input":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// readEvent reads one Server-Sent Event, through its blank line.
func readEvent(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	var event strings.Builder
	for {
		line, err := r.ReadString('\n')
		event.WriteString(line)
		if err != nil {
			t.Fatalf("after %q: %v", event.String(), err)
		}
		if line == "\n" {
			return event.String()
		}
	}
}

// A flow run's events reach the API client one by one as the service
// flushes them: the first while the handler waits for the test to have
// read it, the rest in order, then a clean end.
func TestStreamedRunIsRelayedAsItComes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const events = 5
	firstRead := make(chan struct{})
	h.fakeService(t, rpc.ServiceFlowRunner, func(c echo.Context) error {
		ctx := c.Request().Context()
		res := c.Response()
		res.Header().Set("Content-Type", "text/event-stream")
		res.Header().Set("X-Run-Id", "run_1")
		res.WriteHeader(http.StatusOK)
		for i := 1; i <= events; i++ {
			_, _ = res.Write([]byte(runEvent(i)))
			res.Flush()
			// The rest comes only once the client has the first, each
			// after a node's work.
			var next <-chan struct{} = firstRead
			if i > 1 {
				paused := make(chan struct{})
				time.AfterFunc(20*time.Millisecond, func() { close(paused) })
				next = paused
			}
			select {
			case <-next:
			case <-ctx.Done():
				return nil
			}
		}
		return nil
	})
	_, key := h.workspace(t, map[string]any{"name": "Acme"})

	resp := h.openRun(t, context.Background(), key)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d %s, want 200", resp.StatusCode, b)
	}
	for name, want := range map[string]string{
		"Content-Type": "text/event-stream", "X-Run-Id": "run_1",
		"Cache-Control": "no-store", "X-Accel-Buffering": "no",
	} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("RateLimit-Limit") == "" {
		t.Errorf("the gateway's own headers are missing: %v", resp.Header)
	}
	body := bufio.NewReader(resp.Body)
	if got := readEvent(t, body); got != runEvent(1) {
		t.Fatalf("first event %q, want %q", got, runEvent(1))
	}
	close(firstRead)
	for i := 2; i <= events; i++ {
		if got := readEvent(t, body); got != runEvent(i) {
			t.Fatalf("event %d is %q, want %q", i, got, runEvent(i))
		}
	}
	if rest, err := io.ReadAll(body); err != nil || len(rest) != 0 {
		t.Fatalf("after the last event: %q, %v; want a clean end", rest, err)
	}
	metrics := h.metrics(t)
	for _, want := range []string{
		`parley_gateway_upstream_duration_seconds_count{service="flow-runner"} 1`,
		`parley_gateway_requests_total{group="flows",status="200"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// A client that goes away mid-run has its run cancelled: the service's
// handler sees its context end, well before the keep-alives would lapse.
func TestClientLeavingCancelsTheStreamedRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cause := make(chan error, 1)
	h.fakeService(t, rpc.ServiceFlowRunner, func(c echo.Context) error {
		res := c.Response()
		res.Header().Set("Content-Type", "text/event-stream")
		_, _ = res.Write([]byte(runEvent(1)))
		res.Flush()
		ctx := c.Request().Context()
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil
	})
	_, key := h.workspace(t, map[string]any{"name": "Acme"})

	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	resp := h.openRun(t, ctx, key)
	if got := readEvent(t, bufio.NewReader(resp.Body)); got != runEvent(1) {
		t.Fatalf("first event %q, want %q", got, runEvent(1))
	}
	leave()
	select {
	case err := <-cause:
		if !errors.Is(err, rpc.ErrStreamCancelled) {
			t.Fatalf("the run was cancelled with %v, want rpc.ErrStreamCancelled", err)
		}
	case <-time.After(rpc.StreamIdle / 2):
		t.Fatalf("the run still goes %s after its client left", rpc.StreamIdle/2)
	}
}

// A client that sends a streamed invoke and then reads nothing is cut once
// a write to it has waited SSE_WRITE_TIMEOUT, and its run is cancelled
// (rpc.ErrStreamCancelled): the run, held by flow control within a window
// of what the gateway could write, produced a bounded amount however much
// it had to say.
func TestClientThatStopsReadingIsCutAndItsRunCancelled(t *testing.T) {
	t.Parallel()
	const (
		writeTimeout = 300 * time.Millisecond
		event        = 64 << 10
		// Without flow control the run would produce all of it before
		// the client is cut; with it, what the sockets' buffers hold and a
		// window.
		most    = 64 << 20
		bounded = 16 << 20
	)
	h := newHarness(t, func(c *gwconfig.Config) { c.SSEWriteTimeout = writeTimeout })
	type stopped struct {
		cause   error
		flushed int
	}
	done := make(chan stopped, 1)
	h.fakeService(t, rpc.ServiceFlowRunner, func(c echo.Context) error {
		ctx := c.Request().Context()
		res := c.Response()
		res.Header().Set("Content-Type", "text/event-stream")
		data := strings.Repeat("x", event)
		flushed := 0
		for ctx.Err() == nil && flushed < most {
			n, _ := fmt.Fprintf(res, "event: message\ndata: %s\n\n", data)
			res.Flush()
			flushed += n
		}
		done <- stopped{cause: context.Cause(ctx), flushed: flushed}
		return nil
	})
	_, key := h.workspace(t, map[string]any{"name": "Acme"})

	req, err := http.NewRequest(http.MethodPost, h.url+"/v1/flows/f1/invoke", strings.NewReader(`{"input":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	client := sse.OpenSilent(t, req)
	sent := time.Now()
	var got stopped
	select {
	case got = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the run still goes 20 s after its client stopped reading")
	}
	t.Logf("run cancelled %s after the request, having flushed %d bytes", time.Since(sent).Round(time.Millisecond), got.flushed)
	if !errors.Is(got.cause, rpc.ErrStreamCancelled) {
		t.Fatalf("the run stopped with %v after %d bytes, want rpc.ErrStreamCancelled", got.cause, got.flushed)
	}
	if got.flushed > bounded {
		t.Fatalf("the run flushed %d bytes for a client that read nothing, want at most %d", got.flushed, bounded)
	}
	// The gateway has let the connection go: what it had written, and then
	// the end of the connection, not of the stream.
	body := client.Drain(t, 10*time.Second)
	if len(body) >= got.flushed {
		t.Fatalf("the client could read %d bytes of the %d flushed; want the stream cut short", len(body), got.flushed)
	}
}
