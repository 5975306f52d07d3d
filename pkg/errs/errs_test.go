package errs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/parleyhq/parley/pkg/errs"
)

func TestEchoHandlerRendersCodeAndMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		give       error
		wantStatus int
		wantCode   string
		wantHeader map[string]string
		wantExtra  map[string]any
	}{
		{"own error", errs.NotFound("conversation_not_found", "no conversation c1"), 404, "conversation_not_found", nil, nil},
		{"wrapped own error", fmt.Errorf("load: %w", errs.InvalidRequest("limit must be 1..100")), 400, "invalid_request", nil, nil},
		{"header", errs.New(429, "rate_limited", "slow down").WithHeader("Retry-After", "7"), 429, "rate_limited", map[string]string{"Retry-After": "7"}, nil},
		{"extra field", errs.New(409, "idempotency_response_unavailable", "too large").WithExtra("run_id", "r1"), 409, "idempotency_response_unavailable", nil, map[string]any{"run_id": "r1"}},
		{"echo 404", echo.ErrNotFound, 404, "not_found", nil, nil},
		{"echo 405", echo.ErrMethodNotAllowed, 405, "method_not_allowed", nil, nil},
		{"echo 413", echo.ErrStatusRequestEntityTooLarge, 413, "payload_too_large", nil, nil},
		{"unknown error", errors.New("pq: password authentication failed for user secret"), 500, "internal_error", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zap.ErrorLevel)
			e := echo.New()
			rec := httptest.NewRecorder()
			c := e.NewContext(httptest.NewRequest(http.MethodGet, "/x", nil), rec)
			errs.EchoHandler(zap.New(core))(tt.give, c)

			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d", rec.Code, tt.wantStatus)
			}
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body.String(), err)
			}
			if body["code"] != tt.wantCode || body["message"] == "" {
				t.Fatalf("body = %v, want code %s and a message", body, tt.wantCode)
			}
			for k, v := range tt.wantHeader {
				if rec.Header().Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, rec.Header().Get(k), v)
				}
			}
			for k, v := range tt.wantExtra {
				if body[k] != v {
					t.Errorf("body[%s] = %v, want %v", k, body[k], v)
				}
			}
			if tt.wantStatus == 500 {
				if strings.Contains(rec.Body.String(), "password") {
					t.Errorf("internal error leaked: %s", rec.Body.String())
				}
				if logs.Len() != 1 {
					t.Errorf("unknown error logged %d times, want once", logs.Len())
				}
			} else if logs.Len() != 0 {
				t.Errorf("client error logged at error level")
			}
		})
	}
}
