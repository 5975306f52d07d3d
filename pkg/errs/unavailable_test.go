package errs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/testenv/ports"
)

// The errors are the drivers' own, from real connection attempts, so that a
// driver upgrade that changes their shape fails here.
func TestDependencyDownRecognisesTheDriversErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A port nothing listens on: connecting is refused at once, as when
	// the server is down.
	addr := ports.Refused(t)

	_, pgErr := pgx.Connect(ctx, "postgres://postgres@"+addr+"/parley?sslmode=disable")
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	redisErr := rdb.Ping(ctx).Err()
	timedOut, cancelTimedOut := context.WithTimeout(ctx, time.Nanosecond)
	defer cancelTimedOut()
	<-timedOut.Done()

	tests := []struct {
		name string
		give error
		want bool
	}{
		{"postgres refused", fmt.Errorf("find key: %w", pgErr), true},
		{"redis refused", redisErr, true},
		{"nats reconnecting", fmt.Errorf("publish: %w", nats.ErrReconnectBufExceeded), true},
		{"nats no responders", nats.ErrNoResponders, true},
		{"pool wait ran out", fmt.Errorf("query: %w", timedOut.Err()), true},
		{"redis pool timeout", redis.ErrPoolTimeout, true},
		{"postgres shutting down", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{"postgres starting up", &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, true},
		{"postgres connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"plain bug", errors.New("nil map"), false},
		{"caller went away", context.Canceled, false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.give == nil && tt.want {
				t.Fatal("no error to classify")
			}
			if got := errs.DependencyDown(tt.give); got != tt.want {
				t.Fatalf("DependencyDown(%v) = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
}

func TestEchoHandlerAnswersDependencyDown503WithRetryAfter(t *testing.T) {
	t.Parallel()
	_, err := pgx.Connect(context.Background(), "postgres://postgres:hunter2@"+ports.Refused(t)+"/parley?sslmode=disable")
	core, logs := observer.New(zap.DebugLevel)
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/v1/me", nil), rec)
	errs.EchoHandler(zap.New(core))(fmt.Errorf("authenticate: %w", err), c)

	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q; want 503 and 1", rec.Code, rec.Header().Get("Retry-After"))
	}
	var body map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["code"] != errs.CodeServiceUnavailable {
		t.Fatalf("body %s: %v", rec.Body.String(), err)
	}
	if strings.Contains(rec.Body.String(), "hunter2") || strings.Contains(rec.Body.String(), "127.0.0.1") {
		t.Fatalf("the cause leaked: %s", rec.Body.String())
	}
	if logs.Len() != 1 || logs.All()[0].Level != zap.WarnLevel {
		t.Fatalf("logged %d entries %v, want one warning", logs.Len(), logs.All())
	}
}

func TestServiceUnavailableCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	e := errs.ServiceUnavailable("%s is not running", "messaging")
	if e.Status != http.StatusServiceUnavailable || e.Code != errs.CodeServiceUnavailable || e.Header.Get("Retry-After") != "1" || e.Message != "messaging is not running" {
		t.Fatalf("got %+v", e)
	}
}

func TestEvery503SaysWhenToComeBack(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/x", nil), rec)
	errs.EchoHandler(zap.NewNop())(errs.New(http.StatusServiceUnavailable, errs.CodeServiceUnavailable, "busy"), c)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q; want 503 and 1", rec.Code, rec.Header().Get("Retry-After"))
	}
}
