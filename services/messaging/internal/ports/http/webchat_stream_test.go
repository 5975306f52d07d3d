package http

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/errs"
	webchatadapter "github.com/parleyhq/parley/services/messaging/internal/adapters/webchat"
)

// TestStreamRefusals: a stream the bus does not open is refused with a
// Retry-After the widget waits: 429 at this instance's own bound, 503
// while the instance shuts down (its bus closed) and while NATS is out of
// reach.
func TestStreamRefusals(t *testing.T) {
	w := &webchatHandlers{log: zap.NewNop()}
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		code, text string
		retry      string
	}{
		{"instance full", webchatadapter.ErrTooManyStreams, http.StatusTooManyRequests, errs.CodeRateLimited, "on this server", "5"},
		{"shutting down", webchatadapter.ErrClosed, http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "restarting", "1"},
		{"NATS away", errors.New("nats: connection closed"), http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "live updates are unavailable", "2"},
	} {
		e, ok := errs.As(w.streamRefused("ch", tc.err))
		if !ok || e.Status != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.text) || e.Header.Get("Retry-After") != tc.retry {
			t.Errorf("%s: %+v", tc.name, e)
		}
	}
}
