package httpx

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestAccessLog: at debug level every request but the probes is a line
// with its method, path and status; at info there is none.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	for _, level := range []zapcore.Level{zapcore.DebugLevel, zapcore.InfoLevel} {
		core, logs := observer.New(level)
		e := NewEcho(zap.New(core))
		e.GET("/v1/things", func(c echo.Context) error { return c.NoContent(http.StatusTeapot) })
		e.GET("/healthz", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
		for _, path := range []string{"/v1/things", "/healthz"} {
			e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
		}
		lines := logs.FilterMessage("http request").All()
		if level == zapcore.InfoLevel {
			if len(lines) != 0 {
				t.Fatalf("info level: %d access lines, want none", len(lines))
			}
			continue
		}
		if len(lines) != 1 {
			t.Fatalf("debug level: %d access lines, want one (no probe)", len(lines))
		}
		fields := lines[0].ContextMap()
		if fields["method"] != "GET" || fields["path"] != "/v1/things" || fields["status"] != int64(http.StatusTeapot) {
			t.Fatalf("access line %v", fields)
		}
	}
}
