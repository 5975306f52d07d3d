package openaicompat

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

const testKey = "sk-test-0123456789abcdef"

func TestReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		give   string
		want   string
	}{
		{"openai error", 429, `{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests"}}`, "Rate limit reached for gpt-4o-mini"},
		{"plain error string", 404, `{"error":"model \"llama9\" not found"}`, `model "llama9" not found`},
		{"html page", 502, "<html>\n  <body>Bad   gateway</body>\n</html>", "<html> <body>Bad gateway</body> </html>"},
		{"empty body", 503, "", "service unavailable"},
		{"error without a message", 500, `{"error":{"code":"x"}}`, `{"error":{"code":"x"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := reason(tt.status, []byte(tt.give)); got != tt.want {
				t.Fatalf("reason = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		give string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 0 ", 0},
		{"-5", 0},
		{"99999999999999", 24 * time.Hour},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"soon", 0},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.give, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %s, want %s", tt.give, got, tt.want)
		}
	}
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give error
		want bool
	}{
		{&UnreachableError{Reason: "no reply"}, true},
		{&StatusError{Status: 429}, true},
		{&StatusError{Status: 500}, true},
		{&StatusError{Status: 503}, true},
		{&StatusError{Status: 400}, false},
		{&StatusError{Status: 401}, false},
		{&StatusError{Status: 404}, false},
		{errors.New("the reply is not the JSON the API documents"), false},
	}
	for _, tt := range tests {
		if got := Retryable(tt.give); got != tt.want {
			t.Errorf("Retryable(%v) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

func TestPost(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/ok":
			if r.Header.Get("Authorization") != "Bearer "+testKey || r.Header.Get("Content-Type") != "application/json" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(`{"answer": 42}`))
		case "/v1/huge":
			_, _ = w.Write([]byte(`{"answer": "` + strings.Repeat("x", MaxReplyBytes) + `"}`))
		case "/v1/limited":
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"message":"slow down, ` + testKey + `"}}`))
		}
	}))
	t.Cleanup(srv.Close)
	e := Endpoint{BaseURL: srv.URL + "/v1/", APIKey: testKey, HTTP: srv.Client()}
	ctx := context.Background()

	var out struct{ Answer int }
	if err := e.Post(ctx, "/ok", map[string]string{}, &out); err != nil || out.Answer != 42 {
		t.Fatalf("Post = %+v, %v", out, err)
	}

	err := e.Post(ctx, "/huge", map[string]string{}, &out)
	if err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") || Retryable(err) {
		t.Fatalf("huge reply: %v, want a malformed reply not retried", err)
	}

	err = e.Post(ctx, "/limited", map[string]string{}, &out)
	var status *StatusError
	if !errors.As(err, &status) || status.Status != 429 || status.RetryAfter != 7*time.Second {
		t.Fatalf("limited: %#v", err)
	}
	if want := "HTTP 429: slow down, " + Redacted; err.Error() != want {
		t.Fatalf("limited: %q, want %q", err, want)
	}

	srv.Close()
	err = e.Post(ctx, "/ok", map[string]string{}, &out)
	var unreachable *UnreachableError
	if !errors.As(err, &unreachable) || strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("closed server: %v, want an UnreachableError without the URL", err)
	}
}

// The key is taken out before the reason is cut, so no prefix of it is
// left at the cut either.
func TestRedactBeforeTruncating(t *testing.T) {
	t.Parallel()
	e := Endpoint{APIKey: testKey}
	msg := strings.Repeat("é", maxReasonRunes-5) + testKey + " tail"
	got := e.redact(msg)
	if strings.Contains(got, testKey[:5]) || utf8.RuneCountInString(got) > maxReasonRunes+1 || !strings.HasSuffix(got, "…") {
		t.Fatalf("redact = %q", got)
	}
}

// Whatever a server answers, an error never carries the key.
func FuzzErrorsNeverCarryTheKey(f *testing.F) {
	f.Add(500, `{"error":{"message":"bad key sk-test-0123456789abcdef"}}`)
	f.Add(401, `{"error":"sk-test-0123456789abcdef"}`)
	f.Add(200, `not json sk-test-0123456789abcdef`)
	f.Add(200, `{"x": "sk-test-0123456789abcdef"`)
	f.Add(502, "<p>\nsk-test-0123456789abcdef\n</p>")
	srvBody := make(chan struct {
		status int
		body   string
	}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply := <-srvBody
		w.WriteHeader(reply.status)
		_, _ = w.Write([]byte(reply.body))
	}))
	f.Cleanup(srv.Close)
	e := Endpoint{BaseURL: srv.URL, APIKey: testKey, HTTP: srv.Client()}
	f.Fuzz(func(t *testing.T, status int, body string) {
		if status < 200 || status > 599 {
			return
		}
		srvBody <- struct {
			status int
			body   string
		}{status, body}
		var out struct{ Choices []struct{} }
		err := e.Post(context.Background(), "/chat/completions", map[string]string{}, &out)
		if err != nil && strings.Contains(err.Error(), testKey) {
			t.Fatalf("error carries the key: %q", err)
		}
	})
}
