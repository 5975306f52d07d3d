package httpx_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/testenv/dribble"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/sse"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// readBound is the read timeout of these tests' listeners; margin is what
// a connection may outlive it by: the server's last answer, and its wait
// for the client to read it before the connection closes.
const (
	readBound = 300 * time.Millisecond
	margin    = 2 * time.Second
)

// servedWithin serves e with NewServer's bounds and a read timeout of
// readBound, until the test ends.
func servedWithin(t *testing.T, e *echo.Echo) string {
	t.Helper()
	addr := ports.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() { result <- httpx.Serve(ctx, httpx.NewServer(addr, e, readBound), time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-result; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	e.GET("/ok", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	wait.For(t, 10*time.Second, "listening", func() error {
		resp, err := http.Get("http://" + addr + "/ok")
		if err != nil {
			return err
		}
		return resp.Body.Close()
	})
	return addr
}

// A body that does not arrive within the read timeout is answered 408
// request_timeout by the handler reading it, and its connection closed.
func TestABodyDribbledPastTheReadTimeoutIs408(t *testing.T) {
	t.Parallel()
	e := httpx.NewEcho(zap.NewNop())
	e.POST("/read", func(c echo.Context) error {
		var v map[string]any
		if err := httpx.BindJSON(c, &v); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	})
	addr := servedWithin(t, e)
	res, err := dribble.Send(addr, dribble.Request{Method: http.MethodPost, Path: "/read", ContentLength: 100_000, Every: 50 * time.Millisecond}, readBound+margin)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	if err := json.Unmarshal(res.Body, &body); err != nil || res.Status != http.StatusRequestTimeout || body["code"] != errs.CodeRequestTimeout || body["message"] == "" {
		t.Fatalf("answered %d %s, want 408 request_timeout", res.Status, res.Body)
	}
	if !res.Closed || res.After < readBound {
		t.Fatalf("connection closed %v after %s, want closed after %s and within %s more", res.Closed, res.After, readBound, margin)
	}
}

// A body no handler reads (an answer refused before it, such as a 401) is
// cut at the read timeout, the answer sent then; a handler that drops it
// (DropBody) is answered at once, and the connection closed.
func TestAnUnreadBodyIsCutAtTheReadTimeout(t *testing.T) {
	t.Parallel()
	e := httpx.NewEcho(zap.NewNop())
	e.POST("/refuse", func(echo.Context) error { return errs.Unauthorized("no key") })
	e.POST("/drop", func(c echo.Context) error {
		httpx.DropBody(c)
		return errs.Unauthorized("no key")
	})
	addr := servedWithin(t, e)
	req := dribble.Request{Method: http.MethodPost, Path: "/refuse", ContentLength: 100_000, Every: 50 * time.Millisecond}
	res, err := dribble.Send(addr, req, readBound+margin)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusUnauthorized || !res.Closed || res.After < readBound {
		t.Fatalf("answered %d %s, closed %v after %s; want 401 and closed after %s and within %s more", res.Status, res.Body, res.Closed, res.After, readBound, margin)
	}
	req.Path = "/drop"
	res, err = dribble.Send(addr, req, readBound)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusUnauthorized || !res.Closed {
		t.Fatalf("dropped: answered %d %s, closed %v after %s; want 401 and closed before %s", res.Status, res.Body, res.Closed, res.After, readBound)
	}
}

// Only reading is bounded: a stream, and an answer that takes long once
// its request is read, go on past the read timeout.
func TestAnswersOutliveTheReadTimeout(t *testing.T) {
	t.Parallel()
	const events = 10
	every := readBound / 3 // events*every is past the bound, several times
	e := httpx.NewEcho(zap.NewNop())
	e.GET("/stream", func(c echo.Context) error {
		s := httpx.StartSSE(c.Response())
		for i := range events {
			select {
			case <-c.Request().Context().Done():
				return nil
			case <-time.After(every):
			}
			if s.Event("tick", fmt.Appendf(nil, `{"n":%d}`, i)) != nil {
				return nil
			}
		}
		return nil
	})
	e.POST("/slow", func(c echo.Context) error {
		var v map[string]any
		if err := httpx.BindJSON(c, &v); err != nil {
			return err
		}
		select {
		case <-c.Request().Context().Done():
			return c.Request().Context().Err()
		case <-time.After(3 * readBound):
		}
		return c.JSON(http.StatusOK, v)
	})
	addr := servedWithin(t, e)

	resp, err := http.Get("http://" + addr + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	got, err := sse.Parse(string(raw))
	if err != nil || len(got) != events || got[events-1].Data != fmt.Sprintf(`{"n":%d}`, events-1) {
		t.Fatalf("stream: %v %q, want %d events", err, raw, events)
	}

	start := time.Now()
	resp, err = http.Post("http://"+addr+"/slow", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(raw) != "{\"a\":1}\n" || time.Since(start) < 3*readBound {
		t.Fatalf("slow answer: %d %q after %s", resp.StatusCode, raw, time.Since(start))
	}
}
