package parley

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hit is one request a test server received.
type hit struct {
	method, path, query string
	header              http.Header
	body                string
}

// recorder keeps the requests a test server receives.
type recorder struct {
	mu   sync.Mutex
	hits []hit
}

func (r *recorder) add(req *http.Request) int {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hits = append(r.hits, hit{req.Method, req.URL.Path, req.URL.RawQuery, req.Header.Clone(), string(b)})
	return len(r.hits)
}

func (r *recorder) all() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hits)
}

// server starts a test server whose handler gets the attempt's number (1
// first) and returns a client of it whose waits are recorded, not slept,
// unless realWait.
func server(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int), opts ...Option) (*Client, *recorder, *[]time.Duration) {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(w, r, rec.add(r))
	}))
	t.Cleanup(srv.Close)
	// Its own transport, so that no connection is shared between tests.
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := New("pk_test", append([]Option{WithBaseURL(srv.URL), WithHTTPClient(&http.Client{Transport: tr})}, opts...)...)
	var mu sync.Mutex
	waits := &[]time.Duration{}
	c.wait = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*waits = append(*waits, d)
		mu.Unlock()
		return ctx.Err()
	}
	return c, rec, waits
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req-1")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, code, retryAfter string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeJSON(w, status, map[string]string{"code": code, "message": code + " happened"})
}

var sentMessage = map[string]any{"message": map[string]any{
	"id": "m1", "conversation_id": "c1", "sender": "user", "type": "text", "content": "hi",
	"metadata": map[string]any{}, "external_id": "44", "created_at": "2026-11-22T10:00:05.5Z",
}}

// hangUp closes the connection without an answer.
func hangUp(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	conn.Close()
}

func TestRequestHeadersAndPath(t *testing.T) {
	t.Parallel()
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, map[string]any{"channels": []any{map[string]any{"id": "ch1", "kind": "telegram"}}})
	}, WithUserAgent("shop/1"))
	chans, err := c.Channels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(chans) != 1 || chans[0].ID != "ch1" || chans[0].Kind != PlatformTelegram {
		t.Errorf("channels %+v", chans)
	}
	h := rec.all()[0]
	if h.method != "GET" || h.path != "/v1/channels" {
		t.Errorf("request %s %s, want GET /v1/channels", h.method, h.path)
	}
	if got := h.header.Get("Authorization"); got != "Bearer pk_test" {
		t.Errorf("Authorization %q", got)
	}
	if got := h.header.Get("User-Agent"); got != "shop/1" {
		t.Errorf("User-Agent %q", got)
	}
	if got := h.header.Get("Idempotency-Key"); got != "" {
		t.Errorf("a read carries Idempotency-Key %q", got)
	}
	if got := New("k").userAgent; got != "parley-go/"+Version {
		t.Errorf("default User-Agent %q", got)
	}
}

func TestSendRetriesWithTheSameKeyAndBody(t *testing.T) {
	t.Parallel()
	c, rec, waits := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 1:
			apiError(w, 503, "service_unavailable", "1")
		case 2:
			apiError(w, 429, "rate_limited", "2")
		case 3:
			apiError(w, 409, "idempotency_in_progress", "")
		default:
			writeJSON(w, 201, sentMessage)
		}
	}, WithRetry(RetryPolicy{MaxAttempts: 4}))
	msg, err := c.SendMessage(context.Background(), SendMessageRequest{ConversationID: "c1", Text: "hi <&>", QuickReplies: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if msg.ID != "m1" || msg.ExternalID != "44" {
		t.Errorf("message %+v", msg)
	}
	hits := rec.all()
	if len(hits) != 4 {
		t.Fatalf("%d attempts, want 4", len(hits))
	}
	key := hits[0].header.Get("Idempotency-Key")
	if len(key) == 0 || len(key) > 128 || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		t.Errorf("generated key %q is not 1–128 printable characters", key)
	}
	for i, h := range hits {
		if got := h.header.Get("Idempotency-Key"); got != key {
			t.Errorf("attempt %d: key %q, want %q", i+1, got, key)
		}
		if h.body != hits[0].body {
			t.Errorf("attempt %d: body %q, want %q", i+1, h.body, hits[0].body)
		}
		if h.method != "POST" || h.path != "/v1/messages" {
			t.Errorf("attempt %d: %s %s", i+1, h.method, h.path)
		}
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(hits[0].body), &body); err != nil || body["text"] != "hi <&>" || body["conversation_id"] != "c1" {
		t.Errorf("body %s (%v)", hits[0].body, err)
	}
	if _, has := body["buttons"]; has {
		t.Errorf("body %s carries empty buttons", hits[0].body)
	}
	// Retry-After 1 s, then 2 s, each with at most a tenth of jitter; then
	// a backoff for idempotency_in_progress.
	if len(*waits) != 3 {
		t.Fatalf("waits %v", *waits)
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second} {
		if d := (*waits)[i]; d < want || d > want+want/10 {
			t.Errorf("wait %d: %v, want Retry-After %v plus at most a tenth", i+1, d, want)
		}
	}
	if d := (*waits)[2]; d < firstBackoff<<2 || d > defaultMaxWait {
		t.Errorf("wait 3: %v, want a backoff", d)
	}

	// Another call gets another key; the caller's key is sent as given.
	if _, err := c.SendMessage(context.Background(), SendMessageRequest{ConversationID: "c1", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(context.Background(), SendMessageRequest{ConversationID: "c1", Text: "hi"}, WithIdempotencyKey("order-42")); err != nil {
		t.Fatal(err)
	}
	hits = rec.all()
	if got := hits[4].header.Get("Idempotency-Key"); got == key || got == "" {
		t.Errorf("the next call's key %q, want a new one", got)
	}
	if got := hits[5].header.Get("Idempotency-Key"); got != "order-42" {
		t.Errorf("the caller's key sent as %q", got)
	}
}

func TestRetryRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		policy   RetryPolicy
		status   int
		code     string
		after    string
		attempts int
		want     *Error
	}{
		{"429 without Retry-After is final", RetryPolicy{}, 429, "daily_invoke_cap", "", 1, ErrDailyInvokeCap},
		{"private-reply cap is final", RetryPolicy{}, 429, "private_reply_daily_cap", "", 1, ErrPrivateReplyDailyCap},
		{"Retry-After over MaxWait returns at once", RetryPolicy{MaxWait: 5 * time.Second}, 429, "rate_limited", "60", 1, ErrRateLimited},
		{"503 over MaxWait returns at once", RetryPolicy{MaxWait: 5 * time.Second}, 503, "service_unavailable", "6", 1, ErrServiceUnavailable},
		{"MaxAttempts bounds 503", RetryPolicy{MaxAttempts: 3}, 503, "service_unavailable", "1", 3, ErrServiceUnavailable},
		{"MaxAttempts 1 disables retries", RetryPolicy{MaxAttempts: 1}, 503, "service_unavailable", "1", 1, ErrServiceUnavailable},
		{"default MaxAttempts is 4", RetryPolicy{}, 429, "concurrency_limited", "1", 4, ErrConcurrencyLimited},
		{"503 without Retry-After backs off", RetryPolicy{MaxAttempts: 3}, 503, "guard_not_wired", "", 3, ErrGuardNotWired},
		{"400 is final", RetryPolicy{}, 400, "input_invalid", "", 1, ErrInputInvalid},
		{"409 session_busy is final", RetryPolicy{}, 409, "session_busy", "", 1, ErrSessionBusy},
		// Every other refusal is final, whatever Retry-After it carries:
		// only 429, 503 and 409 idempotency_in_progress are retried.
		{"401 is final", RetryPolicy{}, 401, "unauthorized", "1", 1, ErrUnauthorized},
		{"404 is final", RetryPolicy{}, 404, "flow_not_found", "1", 1, ErrFlowNotFound},
		{"408 is final", RetryPolicy{}, 408, "request_timeout", "1", 1, ErrRequestTimeout},
		{"409 idempotency_response_unavailable is final", RetryPolicy{}, 409, "idempotency_response_unavailable", "1", 1, ErrIdempotencyResponseUnavailable},
		{"422 idempotency_key_reuse is final", RetryPolicy{}, 422, "idempotency_key_reuse", "1", 1, ErrIdempotencyKeyReuse},
		{"500 is final", RetryPolicy{}, 500, "internal_error", "1", 1, ErrInternalError},
		{"502 is final: the platform may have acted", RetryPolicy{}, 502, "platform_error", "1", 1, ErrPlatformError},
		{"409 idempotency_in_progress backs off up to MaxAttempts", RetryPolicy{}, 409, "idempotency_in_progress", "", 4, ErrIdempotencyInProgress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, rec, waits := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
				apiError(w, tt.status, tt.code, tt.after)
			}, WithRetry(tt.policy))
			_, err := c.Invoke(context.Background(), "f1", map[string]any{"a": 1})
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if n := len(rec.all()); n != tt.attempts {
				t.Errorf("%d attempts, want %d", n, tt.attempts)
			}
			if len(*waits) != tt.attempts-1 {
				t.Errorf("waits %v, want %d", *waits, tt.attempts-1)
			}
			if tt.after == "" {
				// Backoff doubles and stays under the bound.
				for i := 1; i < len(*waits); i++ {
					if (*waits)[i] <= (*waits)[i-1] {
						t.Errorf("waits %v do not grow", *waits)
					}
				}
			}
		})
	}
}

// TestRetryAfterIsWaited waits for real: the answer's Retry-After of one
// second passes before the second attempt.
func TestRetryAfterIsWaited(t *testing.T) {
	t.Parallel()
	var first time.Time
	var gap time.Duration
	c, _, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			first = time.Now()
			apiError(w, 429, "rate_limited", "1")
			return
		}
		gap = time.Since(first)
		writeJSON(w, 200, map[string]any{"flows": []any{}})
	})
	c.wait = sleep
	if _, err := c.Flows(context.Background()); err != nil {
		t.Fatal(err)
	}
	if gap < time.Second {
		t.Errorf("retried after %v, want at least Retry-After's 1 s", gap)
	}
}

func TestCancelDuringWaitReturnsAtOnce(t *testing.T) {
	t.Parallel()
	answered := make(chan struct{})
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		apiError(w, 503, "service_unavailable", "30")
		close(answered)
	}, WithRetry(RetryPolicy{MaxWait: time.Minute}))
	c.wait = sleep
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Me(ctx)
		done <- err
	}()
	<-answered
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("returned %v after the cancel", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call still waits 10 s after its context was cancelled")
	}
	if n := len(rec.all()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// unkeyedPosts are the calls that are neither reads, puts nor deletes and
// carry no Idempotency-Key: each repeat acts again.
var unkeyedPosts = []struct {
	name string
	call func(c *Client) error
}{
	{"POST /webhook/test", func(c *Client) error { _, err := c.TestWebhook(context.Background()); return err }},
	{"POST /typing", func(c *Client) error { return c.SendTyping(context.Background(), "c1") }},
}

func TestConnectionErrors(t *testing.T) {
	t.Parallel()
	hangUpFirst := func(t *testing.T, ok func(w http.ResponseWriter)) func(w http.ResponseWriter, r *http.Request, n int) {
		return func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				hangUp(t, w)
				return
			}
			ok(w)
		}
	}
	t.Run("a send with its key is retried", func(t *testing.T) {
		t.Parallel()
		c, rec, waits := server(t, hangUpFirst(t, func(w http.ResponseWriter) { writeJSON(w, 201, sentMessage) }))
		if _, err := c.SendMessage(context.Background(), SendMessageRequest{ConversationID: "c1", Text: "hi"}); err != nil {
			t.Fatal(err)
		}
		hits := rec.all()
		if len(hits) != 2 {
			t.Fatalf("%d attempts, want 2", len(hits))
		}
		if k := hits[0].header.Get("Idempotency-Key"); k == "" || k != hits[1].header.Get("Idempotency-Key") || hits[0].body != hits[1].body {
			t.Errorf("the retry differs: %+v / %+v", hits[0], hits[1])
		}
		if len(*waits) != 1 {
			t.Errorf("waits %v", *waits)
		}
	})
	t.Run("a read is retried", func(t *testing.T) {
		t.Parallel()
		c, rec, _ := server(t, hangUpFirst(t, func(w http.ResponseWriter) { writeJSON(w, 200, map[string]any{"flows": []any{}}) }))
		if _, err := c.Flows(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := len(rec.all()); n != 2 {
			t.Errorf("%d attempts, want 2", n)
		}
	})
	for _, tt := range unkeyedPosts {
		t.Run(tt.name+" is not retried", func(t *testing.T) {
			t.Parallel()
			c, rec, _ := server(t, hangUpFirst(t, func(w http.ResponseWriter) { writeJSON(w, 200, map[string]any{"ok": true}) }))
			err := tt.call(c)
			var perr *Error
			if err == nil || errors.As(err, &perr) {
				t.Errorf("error %v, want the connection's", err)
			}
			if n := len(rec.all()); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
		})
	}
}

func TestErrorDecoding(t *testing.T) {
	t.Parallel()
	c, _, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch r.URL.Path {
		case "/v1/flows/f1/invoke":
			writeJSON(w, 409, map[string]string{"code": "idempotency_response_unavailable", "message": "not kept", "run_id": "r9"})
		case "/v1/comments/x/reply":
			writeJSON(w, 409, map[string]string{"code": "idempotency_response_unavailable", "message": "not kept", "comment_id": "x"})
		case "/v1/messages":
			writeJSON(w, 409, map[string]string{"code": "idempotency_response_unavailable", "message": "not kept", "message_id": "m7"})
		default:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			io.WriteString(w, "<html><body>Bad Gateway"+strings.Repeat(" é", 300)+"</body></html>")
		}
	}, WithRetry(RetryPolicy{MaxAttempts: 1}))
	ctx := context.Background()

	_, err := c.Invoke(ctx, "f1", nil)
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("error %T %v, want *Error", err, err)
	}
	want := Error{Status: 409, Code: "idempotency_response_unavailable", Message: "not kept", RequestID: "req-1", RunID: "r9", IdempotencyKey: perr.IdempotencyKey}
	if *perr != want || perr.IdempotencyKey == "" {
		t.Errorf("error %+v, want %+v", *perr, want)
	}
	if !errors.Is(err, ErrIdempotencyResponseUnavailable) || errors.Is(err, ErrIdempotencyInProgress) {
		t.Errorf("errors.Is matches by code wrongly for %v", err)
	}
	if s := err.Error(); !strings.Contains(s, "idempotency_response_unavailable") || !strings.Contains(s, "409") || !strings.Contains(s, "req-1") {
		t.Errorf("Error() = %q", s)
	}
	if _, err := c.ReplyToComment(ctx, "x", "hi"); !errors.As(err, &perr) || perr.CommentID != "x" {
		t.Errorf("comment reply error %+v", err)
	}
	if _, err := c.SendMessage(ctx, SendMessageRequest{ConversationID: "c", Text: "t"}); !errors.As(err, &perr) || perr.MessageID != "m7" {
		t.Errorf("send error %+v", err)
	}

	_, err = c.Me(ctx)
	if !errors.As(err, &perr) {
		t.Fatalf("a proxy's page: %T %v, want *Error", err, err)
	}
	if perr.Status != 502 || perr.Code != "" || !strings.Contains(perr.Message, "Bad Gateway") || len(perr.Message) > 400 {
		t.Errorf("a proxy's page: %+v", perr)
	}
	if errors.Is(err, ErrPlatformError) {
		t.Error("a proxy's 502 page matches ErrPlatformError")
	}
}

func TestSentinels(t *testing.T) {
	t.Parallel()
	codes := Codes()
	seen := map[string]bool{}
	for _, code := range codes {
		if code == "" || seen[code] {
			t.Errorf("code %q empty or twice", code)
		}
		seen[code] = true
	}
	if !seen["conversation_not_found"] || !seen["rate_limited"] || len(codes) != len(sentinels) {
		t.Errorf("Codes() = %v", codes)
	}
	codes[0] = "changed"
	if Codes()[0] == "changed" {
		t.Error("Codes() shares its slice")
	}
	if errors.Is(ErrRateLimited, ErrNotFound) || !errors.Is(&Error{Code: "not_found"}, ErrNotFound) || errors.Is(&Error{}, &Error{}) {
		t.Error("Is compares codes wrongly")
	}
}

func TestPages(t *testing.T) {
	t.Parallel()
	t1 := "2026-11-22T10:00:00.123456Z"
	t2 := "2026-11-21T10:00:00Z"
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		conv := func(id string) map[string]any {
			return map[string]any{"id": id, "platform": "telegram", "channel_id": "ch", "contact": map[string]any{"id": "k"},
				"last_message_at": t2, "created_at": t2}
		}
		switch r.URL.Query().Get("before") {
		case "":
			writeJSON(w, 200, map[string]any{"conversations": []any{conv("a"), conv("b")}, "next_before": t1})
		case t1:
			writeJSON(w, 200, map[string]any{"conversations": []any{conv("c")}, "next_before": t2})
		case t2:
			writeJSON(w, 200, map[string]any{"conversations": []any{conv("d")}, "next_before": nil})
		default:
			apiError(w, 400, "invalid_request", "")
		}
	})
	ctx := context.Background()
	var ids []string
	for conv, err := range c.Conversations(ctx, ConversationsParams{Platform: PlatformTelegram, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, conv.ID)
	}
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(ids, want) {
		t.Errorf("conversations %v, want %v", ids, want)
	}
	hits := rec.all()
	if len(hits) != 3 {
		t.Fatalf("%d pages read, want 3", len(hits))
	}
	if q := hits[0].query; q != "limit=2&platform=telegram" {
		t.Errorf("first page's query %q", q)
	}
	if q := hits[1].query; q != "before=2026-11-22T10%3A00%3A00.123456Z&limit=2&platform=telegram" {
		t.Errorf("second page's query %q", q)
	}

	// A break stops the reading: the second page is never asked for.
	for conv, err := range c.Conversations(ctx, ConversationsParams{}) {
		if err != nil || conv.ID != "a" {
			t.Fatalf("%v %v", conv.ID, err)
		}
		break
	}
	if n := len(rec.all()); n != 4 {
		t.Errorf("%d requests after a break on the first row, want 4", n)
	}

	// An error is yielded and ends the sequence.
	var errs int
	for _, err := range c.Conversations(ctx, ConversationsParams{Before: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}) {
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("error %v", err)
		}
		errs++
	}
	if errs != 1 {
		t.Errorf("%d errors yielded", errs)
	}
}

func TestOpenAPIDocumentSendsNoKey(t *testing.T) {
	t.Parallel()
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, map[string]any{"openapi": "3.1.0"})
	})
	b, err := c.OpenAPIDocument(context.Background())
	if err != nil || !strings.Contains(string(b), `"3.1.0"`) {
		t.Fatalf("%s %v", b, err)
	}
	if h := rec.all()[0]; h.path != "/v1/openapi.json" || h.header.Get("Authorization") != "" {
		t.Errorf("request %s with Authorization %q", h.path, h.header.Get("Authorization"))
	}
}

func TestAnswerCutShortIsRetriedForAKeyedCall(t *testing.T) {
	t.Parallel()
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Content-Length", "500")
			w.WriteHeader(201)
			io.WriteString(w, `{"message":`)
			w.(http.Flusher).Flush()
			hangUp(t, w)
			return
		}
		writeJSON(w, 201, sentMessage)
	})
	if _, err := c.SendMessage(context.Background(), SendMessageRequest{ConversationID: "c1", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if hits := rec.all(); len(hits) != 2 || hits[0].header.Get("Idempotency-Key") != hits[1].header.Get("Idempotency-Key") {
		t.Errorf("attempts %+v", hits)
	}
}

// A 503 may come after the call reached its service (the gateway answers
// 503 when a service "did not answer in time"): a call without a key that
// is not a read, put or delete acts again when repeated, so it is not.
func TestServiceUnavailableIsNotRetriedWithoutAKey(t *testing.T) {
	t.Parallel()
	for _, tt := range unkeyedPosts {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, rec, waits := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					apiError(w, 503, "service_unavailable", "1")
					return
				}
				writeJSON(w, 200, map[string]any{"ok": true, "delivery": map[string]any{"id": "d1"}})
			})
			if err := tt.call(c); !errors.Is(err, ErrServiceUnavailable) {
				t.Errorf("error %v, want service_unavailable", err)
			}
			if n := len(rec.all()); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
			if len(*waits) != 0 {
				t.Errorf("waits %v, want none", *waits)
			}
		})
	}
}

// twoDeliveryPages is a client of a server whose delivery log is two pages
// of one delivery each.
func twoDeliveryPages(t *testing.T) *Client {
	t1 := "2026-11-22T10:00:00.123456Z"
	c, _, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		next := any(t1)
		if r.URL.Query().Get("before") != "" {
			next = nil
		}
		writeJSON(w, 200, map[string]any{"deliveries": []any{map[string]any{"id": "d" + strconv.Itoa(n)}}, "next_before": next})
	})
	return c
}

// countAll ranges over seq and returns how many deliveries it yielded.
func countAll(t *testing.T, seq iter.Seq2[Delivery, error]) int {
	n := 0
	for _, err := range seq {
		if err != nil {
			t.Error(err)
			return n
		}
		n++
	}
	return n
}

// An iterator walks every page each time it is ranged over, not from where
// an earlier loop stopped.
func TestPagesIteratorIsReusable(t *testing.T) {
	t.Parallel()
	seq := twoDeliveryPages(t).Deliveries(context.Background(), DeliveriesParams{})
	for i := range 2 {
		if n := countAll(t, seq); n != 2 {
			t.Errorf("loop %d: %d deliveries, want 2", i+1, n)
		}
	}
}

// One iterator may be ranged over by several goroutines at once (run with
// -race).
func TestPagesIteratorConcurrentLoops(t *testing.T) {
	t.Parallel()
	seq := twoDeliveryPages(t).Deliveries(context.Background(), DeliveriesParams{Limit: 1})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n := countAll(t, seq); n != 2 {
				t.Errorf("%d deliveries, want 2", n)
			}
		}()
	}
	wg.Wait()
}

// An id is one path segment whatever it holds: "." and ".." are escaped,
// or a server or proxy that cleans the path would route the call
// elsewhere (/v1/comments/.. is /v1/).
func TestPathIDsAreOneSegment(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var uris []string
	c, _, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		mu.Lock()
		uris = append(uris, r.RequestURI)
		mu.Unlock()
		apiError(w, 404, "comment_not_found", "")
	})
	for _, id := range []string{"..", ".", "a/b", "a?b#c", "a b"} {
		_, _ = c.Comment(context.Background(), id)
	}
	want := []string{"/v1/comments/%2E%2E", "/v1/comments/%2E", "/v1/comments/a%2Fb", "/v1/comments/a%3Fb%23c", "/v1/comments/a%20b"}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(uris, want) {
		t.Errorf("paths %q, want %q", uris, want)
	}
}

// A delete whose answer was lost is retried; the retry's 404 says the
// webhook is gone, which is what was asked.
func TestDeleteWebhookRetriedAfterALostAnswer(t *testing.T) {
	t.Parallel()
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			hangUp(t, w) // deleted, the answer lost
			return
		}
		apiError(w, 404, "webhook_not_found", "")
	})
	if err := c.DeleteWebhook(context.Background()); err != nil {
		t.Errorf("error %v, want nil: the first attempt may have deleted it", err)
	}
	if n := len(rec.all()); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}

	// Without a lost answer, a 404 is the caller's to know.
	c, _, _ = server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		apiError(w, 404, "webhook_not_found", "")
	})
	if err := c.DeleteWebhook(context.Background()); !errors.Is(err, ErrWebhookNotFound) {
		t.Errorf("error %v, want webhook_not_found", err)
	}
}

// TestIdempotencyKeyOfAFailedCall: when a keyed call's retries run out,
// its error names the key it sent on every attempt, so that the caller can
// repeat the call later as the same call; an unkeyed call's error names
// none.
func TestIdempotencyKeyOfAFailedCall(t *testing.T) {
	t.Parallel()
	t.Run("still in progress", func(t *testing.T) {
		t.Parallel()
		c, rec, _ := server(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			apiError(w, http.StatusConflict, "idempotency_in_progress", "")
		}, WithRetry(RetryPolicy{MaxAttempts: 2}))
		_, err := c.Invoke(context.Background(), "f1", map[string]any{})
		if !errors.Is(err, ErrIdempotencyInProgress) {
			t.Fatalf("error %v, want idempotency_in_progress", err)
		}
		hits := rec.all()
		if len(hits) != 2 {
			t.Fatalf("%d attempts, want 2", len(hits))
		}
		if key := IdempotencyKeyOf(err); key == "" || key != hits[1].header.Get("Idempotency-Key") {
			t.Errorf("IdempotencyKeyOf = %q, the attempts sent %q", key, hits[1].header.Get("Idempotency-Key"))
		}
	})
	t.Run("no answer", func(t *testing.T) {
		t.Parallel()
		c, rec, _ := server(t, func(w http.ResponseWriter, _ *http.Request, _ int) { hangUp(t, w) },
			WithRetry(RetryPolicy{MaxAttempts: 2}))
		_, err := c.SendMessage(context.Background(), SendMessageRequest{ConversationID: "c1", Text: "hi"}, WithIdempotencyKey("order-1001-reply"))
		var perr *Error
		if err == nil || errors.As(err, &perr) {
			t.Fatalf("error %v, want the connection's", err)
		}
		if key := IdempotencyKeyOf(err); key != "order-1001-reply" || len(rec.all()) != 2 {
			t.Errorf("IdempotencyKeyOf = %q after %d attempts, want the caller's key after 2", key, len(rec.all()))
		}
	})
	// A deadline is the commonest "no answer": the attempt may have acted.
	t.Run("the context ends during an attempt", func(t *testing.T) {
		t.Parallel()
		c, hungUp := holding(t)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := c.SendMessage(ctx, SendMessageRequest{ConversationID: "c1", Text: "hi"}, WithIdempotencyKey("order-7"))
		if !errors.Is(err, context.DeadlineExceeded) || IdempotencyKeyOf(err) != "order-7" {
			t.Errorf("error %v with key %q, want the deadline with order-7", err, IdempotencyKeyOf(err))
		}
		hungUp()
	})
	t.Run("the context ends during a wait", func(t *testing.T) {
		t.Parallel()
		c, _, _ := server(t, func(w http.ResponseWriter, _ *http.Request, n int) {
			if n == 1 {
				hangUp(t, w)
				return
			}
			apiError(w, http.StatusServiceUnavailable, "service_unavailable", "1")
		})
		canceled := func(context.Context, time.Duration) error { return context.Canceled }
		// The first call's wait follows its lost answer; the second's
		// follows a 503 (its first wait passes, the next is canceled).
		for n, wait := range []func(context.Context, time.Duration) error{
			canceled,
			func(context.Context, time.Duration) error { c.wait = canceled; return nil },
		} {
			c.wait = wait
			_, err := c.SendMessage(context.Background(), SendMessageRequest{ConversationID: "c1", Text: "hi"}, WithIdempotencyKey("order-8"))
			if !errors.Is(err, context.Canceled) || IdempotencyKeyOf(err) != "order-8" {
				t.Errorf("wait %d: error %v with key %q, want canceled with order-8", n, err, IdempotencyKeyOf(err))
			}
		}
	})
	t.Run("a call without a key", func(t *testing.T) {
		t.Parallel()
		c, _, _ := server(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			apiError(w, http.StatusNotFound, "webhook_not_found", "")
		})
		if _, err := c.Webhook(context.Background()); !errors.Is(err, ErrWebhookNotFound) || IdempotencyKeyOf(err) != "" {
			t.Errorf("error %v with key %q, want webhook_not_found without one", err, IdempotencyKeyOf(err))
		}
	})
}

// TestCallInfo: WithCallInfo gives the key a call carried (generated or
// given, also when the call fails), and from the answer that succeeded
// its request id and whether it was the first answer replayed
// (Idempotent-Replayed: true); a retried call's info is its last answer's.
func TestCallInfo(t *testing.T) {
	t.Parallel()
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 1:
			apiError(w, 503, "service_unavailable", "1")
		case 2:
			w.Header().Set("Idempotent-Replayed", "true")
			writeJSON(w, 201, sentMessage)
		case 3:
			writeJSON(w, 201, sentMessage)
		default:
			apiError(w, 409, "idempotency_key_reused", "")
		}
	})
	ctx := context.Background()
	var info CallInfo
	if _, err := c.SendMessage(ctx, SendMessageRequest{ConversationID: "c1", Text: "hi"}, WithCallInfo(&info)); err != nil {
		t.Fatal(err)
	}
	if sent := rec.all()[0].header.Get("Idempotency-Key"); info.IdempotencyKey != sent || sent == "" || !info.Replayed || info.RequestID != "req-1" {
		t.Errorf("a replayed answer: %+v, key sent %q", info, sent)
	}
	if _, err := c.SendMessage(ctx, SendMessageRequest{ConversationID: "c1", Text: "hi"}, WithCallInfo(&info), WithIdempotencyKey("order-42")); err != nil {
		t.Fatal(err)
	}
	if info != (CallInfo{IdempotencyKey: "order-42", RequestID: "req-1"}) {
		t.Errorf("a first answer: %+v", info)
	}
	if _, err := c.SendMessage(ctx, SendMessageRequest{ConversationID: "c1", Text: "hi"}, WithCallInfo(&info), WithIdempotencyKey("order-43")); err == nil {
		t.Fatal("a refused call succeeded")
	}
	if info != (CallInfo{IdempotencyKey: "order-43"}) {
		t.Errorf("a refused call: %+v", info)
	}
}
