package parley

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// endless writes bytes until the client hangs up, or 256 MiB, and counts
// them in sent.
func endless(w http.ResponseWriter, contentType string, sent *atomic.Int64) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(200)
	chunk := []byte(strings.Repeat("x", 32<<10))
	for sent.Load() < 256<<20 {
		n, err := w.Write(chunk)
		sent.Add(int64(n))
		if err != nil {
			return
		}
	}
}

// unbounded is the most bytes a client that reads at most 1 MiB lets a
// server send: that MiB and what the sockets' buffers hold.
const unbounded = 32 << 20

// TestMalformedAnswers: a success the client cannot read is an error
// wrapping ErrMalformedAnswer, with the call's key, after one attempt; so
// is one in place of the OpenAPI document.
func TestMalformedAnswers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		answer func(w http.ResponseWriter)
	}{
		{"truncated JSON", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"message": {"id": "m1", "conv`)
		}},
		{"a proxy's HTML page with 200", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html><body>Welcome to the hotel wifi</body></html>")
		}},
		{"204 where a body is due", func(w http.ResponseWriter) { w.WriteHeader(204) }},
		{"null", func(w http.ResponseWriter) { writeJSON(w, 200, nil) }},
		{"the property of the wrong type", func(w http.ResponseWriter) { writeJSON(w, 201, map[string]any{"message": 5}) }},
		{"no property", func(w http.ResponseWriter) { writeJSON(w, 201, map[string]any{"other": 5}) }},
		{"a body over the bound", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"message": {"id": "`+strings.Repeat("m", 2<<10)+`"}}`)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) { tt.answer(w) })
			c.maxAnswer = 1 << 10
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := c.SendMessage(ctx, SendMessageRequest{ConversationID: "c1", Text: "hi"}, WithIdempotencyKey("k-1"))
			if !errors.Is(err, ErrMalformedAnswer) {
				t.Fatalf("error %v, want ErrMalformedAnswer", err)
			}
			if k := IdempotencyKeyOf(err); k != "k-1" {
				t.Errorf("IdempotencyKeyOf %q, want k-1", k)
			}
			if n := len(rec.all()); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
			// Nor is it taken for the API's document.
			if b, err := c.OpenAPIDocument(ctx); !errors.Is(err, ErrMalformedAnswer) || b != nil {
				t.Errorf("OpenAPIDocument: %q, %v; want ErrMalformedAnswer", b, err)
			}
			if n := len(rec.all()); n != 2 {
				t.Errorf("%d attempts in all, want 2", n)
			}
		})
	}
}

// TestAnswerWithoutEndIsBounded: the client stops reading a body at its
// bound (it never reads the whole of one that does not end).
func TestAnswerWithoutEndIsBounded(t *testing.T) {
	t.Parallel()
	var sent atomic.Int64
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) { endless(w, "application/json", &sent) })
	c.maxAnswer = 1 << 20
	_, err := c.Flows(context.Background())
	if !errors.Is(err, ErrMalformedAnswer) {
		t.Fatalf("error %v, want ErrMalformedAnswer", err)
	}
	if n := len(rec.all()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
	if n := sent.Load(); n > unbounded {
		t.Errorf("the server sent %d bytes", n)
	}
}

// TestErrorAnswersOfAnyShape: an error answer that is not {"code",
// "message"} is an *Error with its status, no code and the body's start.
func TestErrorAnswersOfAnyShape(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, contentType, body string
		status                  int
	}{
		{"JSON of another shape", "application/json", `{"error": "boom"}`, 500},
		{"a code that is not a string", "application/json", `{"code": 7, "message": "x"}`, 400},
		{"JSON with a text type", "text/plain", `{"code": "not_found", "message": "x"}`, 404},
		{"no body", "", "", 502},
		{"a huge page", "text/html", strings.Repeat("<p>oops</p>", 100_000), 502},
		{"bytes that are not UTF-8", "application/octet-stream", "bad \xff\xfe gateway", 502},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if tt.contentType != "" {
					w.Header().Set("Content-Type", tt.contentType)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}, WithRetry(RetryPolicy{MaxAttempts: 1}))
			_, err := c.Me(context.Background())
			var perr *Error
			if !errors.As(err, &perr) || perr.Status != tt.status || perr.Code != "" || len(perr.Message) > 400 {
				t.Fatalf("error %#v", err)
			}
			if !utf8.ValidString(perr.Message) {
				t.Errorf("message %q is not UTF-8", perr.Message)
			}
			if tt.body != "" && !strings.Contains(perr.Message, strings.ToValidUTF8(tt.body[:min(len(tt.body), 10)], "\uFFFD")) {
				t.Errorf("message %q lacks the body's start", perr.Message)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 3 ", 3 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"1.5", 0},
		{"soon", 0},
		{"0x10", 0},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 0}, // past
		// Seconds whose product overflows a Duration: the longest wait, not
		// one wrapped around (18446744074 s is 2^64 ns and 0.29 s).
		{"18446744074", math.MaxInt64},
		{"9223372037", math.MaxInt64},
		{"99999999999999999999999999", math.MaxInt64},
	} {
		if got := parseRetryAfter(tt.in); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if got := parseRetryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)); got < 59*time.Minute || got > time.Hour {
		t.Errorf("an hour ahead: %v", got)
	}
}

// TestAbsurdRetryAfter: a Retry-After beyond MaxWait, however written, is
// returned at once; an unreadable one is as none. With MaxWait as long as
// a Duration holds (no bound), one too large for a Duration is still
// beyond it, and one just within it waits, never wrapped around by its
// jitter into a retry at once.
func TestAbsurdRetryAfter(t *testing.T) {
	t.Parallel()
	// Jitter on the longest waits stops at the longest Duration.
	for range 1000 {
		if d := (RetryPolicy{}).withJitter(math.MaxInt64 - 100*time.Millisecond); d < math.MaxInt64-100*time.Millisecond {
			t.Fatalf("a wait of %v, wrapped around", d)
		}
	}
	for _, tt := range []struct {
		name, after string
		status      int
		attempts    int
		maxWait     time.Duration // 0: the default
	}{
		{"429 wrapped-around seconds", "18446744074", 429, 1, 0},
		{"429 huge seconds", "99999999999999999999999999", 429, 1, 0},
		{"429 negative", "-1", 429, 1, 0},
		{"429 garbage", "soon", 429, 1, 0},
		{"429 a past date", "Wed, 21 Oct 2015 07:28:00 GMT", 429, 1, 0},
		{"503 wrapped-around seconds", "18446744074", 503, 1, 0},
		{"503 garbage backs off", "soon", 503, 4, 0},
		{"503 a past date backs off", "Wed, 21 Oct 2015 07:28:00 GMT", 503, 4, 0},
		{"429 huge seconds, no bound", "99999999999999999999999999", 429, 1, math.MaxInt64},
		{"429 wrapped-around seconds, no bound", "18446744074", 429, 1, math.MaxInt64},
		{"429 seconds just within a Duration, no bound", "9223372036", 429, 4, math.MaxInt64},
		{"503 huge seconds, no bound", "99999999999999999999999999", 503, 1, math.MaxInt64},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, rec, waits := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
				apiError(w, tt.status, "rate_limited", tt.after)
			}, WithRetry(RetryPolicy{MaxWait: tt.maxWait}))
			_, err := c.Flows(context.Background())
			var perr *Error
			if !errors.As(err, &perr) || perr.Status != tt.status {
				t.Fatalf("error %v", err)
			}
			if n := len(rec.all()); n != tt.attempts {
				t.Errorf("%d attempts, want %d", n, tt.attempts)
			}
			for _, d := range *waits {
				if d <= 0 || d > max(tt.maxWait, defaultMaxWait) {
					t.Errorf("a wait of %v", d)
				}
			}
		})
	}
}

// TestRedirectsAreNotFollowed: a redirect is an *Error; the POST is not
// turned into a GET whose answer would pass for the send's.
func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if r.URL.Path == "/elsewhere" {
					writeJSON(w, 201, sentMessage)
					return
				}
				http.Redirect(w, r, "/elsewhere", status)
			})
			_, err := c.SendMessage(context.Background(), SendMessageRequest{ConversationID: "c1", Text: "hi"})
			var perr *Error
			if !errors.As(err, &perr) || perr.Status != status || !strings.Contains(perr.Message, "/elsewhere") {
				t.Fatalf("error %v, want the %d as an *Error", err, status)
			}
			if n := len(rec.all()); n != 1 {
				t.Errorf("%d requests, want 1 (no redirect followed)", n)
			}
		})
	}
	t.Run("a client's own CheckRedirect is kept", func(t *testing.T) {
		t.Parallel()
		hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
		c := New("pk", WithHTTPClient(hc))
		if c.hc != hc {
			t.Error("the caller's client was replaced")
		}
		plain := &http.Client{}
		if c := New("pk", WithHTTPClient(plain)); c.hc == plain || plain.CheckRedirect != nil {
			t.Error("the caller's client was changed, or used as it is")
		}
		if c := New("pk", WithHTTPClient(nil)); c.hc.CheckRedirect == nil || http.DefaultClient.CheckRedirect != nil {
			t.Error("WithHTTPClient(nil) is not a copy of http.DefaultClient")
		}
	})
}

// TestPagesOfAHostileServer: a cursor that does not go back in time, or
// one on an empty page, ends the walk with an error, never a loop.
func TestPagesOfAHostileServer(t *testing.T) {
	t.Parallel()
	const t1 = "2026-11-22T10:00:00Z"
	conv := map[string]any{"id": "a", "platform": "telegram", "channel_id": "ch", "contact": map[string]any{"id": "k"},
		"last_message_at": t1, "created_at": t1}
	for _, tt := range []struct {
		name  string
		page  func(before string) map[string]any
		pages int
	}{
		{"the same cursor forever", func(string) map[string]any {
			return map[string]any{"conversations": []any{conv}, "next_before": t1}
		}, 2},
		{"the zero time forever", func(string) map[string]any {
			return map[string]any{"conversations": []any{conv}, "next_before": "0001-01-01T00:00:00Z"}
		}, 1},
		{"a later cursor", func(before string) map[string]any {
			if before == "" {
				return map[string]any{"conversations": []any{conv}, "next_before": t1}
			}
			return map[string]any{"conversations": []any{conv}, "next_before": "2027-01-01T00:00:00Z"}
		}, 2},
		{"empty pages with a cursor", func(before string) map[string]any {
			return map[string]any{"conversations": []any{}, "next_before": t1}
		}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			c, _, _ := server(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				if n.Add(1) > 20 {
					apiError(w, 400, "invalid_request", "") // ends a loop the client did not
					return
				}
				writeJSON(w, 200, tt.page(r.URL.Query().Get("before")))
			})
			var errs []error
			for _, err := range c.Conversations(context.Background(), ConversationsParams{}) {
				if err != nil {
					errs = append(errs, err)
				}
			}
			if len(errs) != 1 || !errors.Is(errs[0], ErrMalformedAnswer) {
				t.Errorf("errors %v, want one ErrMalformedAnswer", errs)
			}
			if got := int(n.Load()); got != tt.pages {
				t.Errorf("%d pages read, want %d", got, tt.pages)
			}
		})
	}
}

// TestNeverAnswered: the context's deadline ends a call whose server
// never answers, and the connection is let go.
func TestNeverAnswered(t *testing.T) {
	t.Parallel()
	c, hungUp := holding(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.SendMessage(ctx, SendMessageRequest{ConversationID: "c1", Text: "hi"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %v", d)
	}
	hungUp()
}

// TestStreamOfAHostileServer: the stream's parser against what a server
// or a proxy may send.
func TestStreamOfAHostileServer(t *testing.T) {
	t.Parallel()
	const end = "event: end\ndata: {\"status\":\"completed\"}\n\n"
	for _, tt := range []struct {
		name    string
		chunks  []string
		events  int   // events yielded
		wantErr error // nil: the stream ends with RunEnd
	}{
		{"CRLF line ends", []string{"event: run_start\r\ndata: {\"run_id\":\"r\"}\r\n\r\nevent: end\r\ndata: {\"status\":\"completed\"}\r\n\r\n"}, 2, nil},
		{"bare CR line ends", []string{"event: run_start\rdata: {\"run_id\":\"r\"}\r\revent: end\rdata: {\"status\":\"completed\"}\r\r"}, 2, nil},
		// A proxy's writes may part a CRLF: still one line end.
		{"CR and LF in separate writes", []string{"event: run_start\r", "\ndata: {\"run_id\":\r", "\ndata: \"r\"}\r", "\n\r", "\n", end}, 2, nil},
		{"a byte order mark over two writes", []string{"\xEF\xBB", "\xBFevent: run_start\ndata: {\"run_id\":\"r\"}\n\n", end}, 2, nil},
		{"an event split byte by byte", strings.Split("event: run_start\ndata: {\"run_id\":\"r\"}\n\n"+end, ""), 2, nil},
		{"comments, retry and id fields", []string{": ping\n\nretry: 10\nid: 7\n\n: ping\nevent: run_start\nretry: -1\ndata: {\"run_id\":\"r\"}\n\n", end}, 2, nil},
		{"an unknown event", []string{"event: novel\ndata: {}\n\n", end}, 1, nil},
		{"no end event", []string{"event: run_start\ndata: {\"run_id\":\"r\"}\n\n"}, 1, ErrStreamDropped},
		// An event is whole at its blank line: one the stream ends before
		// is not dispatched, the end event least of all.
		{"the end event without its blank line", []string{"event: run_start\ndata: {\"run_id\":\"r\"}\n\nevent: end\ndata: {\"status\":\"completed\"}\n"}, 1, ErrStreamDropped},
		{"the end event without its last newline", []string{"event: run_start\ndata: {\"run_id\":\"r\"}\n\nevent: end\ndata: {\"status\":\"completed\"}"}, 1, ErrStreamDropped},
		{"the end event cut within its data", []string{"event: run_start\ndata: {\"run_id\":\"r\"}\n\nevent: end\ndata: {\"status\":\"comp"}, 1, ErrStreamDropped},
		{"data: without its space, a field without a colon", []string{"event:run_start\ndata:{\"run_id\":\ndata\ndata:\"r\"}\n\n", end}, 2, nil},
		{"an event name without data is no event", []string{"event: end\n\n", "event: run_start\nid: 1\n\n", end}, 1, nil},
		{"events after the end event are not read", []string{end, "event: run_start\ndata: <html>\n\n"}, 1, nil},
		{"data that is not JSON", []string{"event: run_start\ndata: <html>\n\n", end}, 0, ErrMalformedAnswer},
		{"a line over the bound", []string{"event: run_start\ndata: {\"run_id\":\"" + strings.Repeat("r", 2<<10) + "\"}\n\n", end}, 0, ErrMalformedAnswer},
		{"a comment over the bound", []string{": " + strings.Repeat("p", 2<<10) + "\n\n", end}, 0, ErrMalformedAnswer},
		{"a comment over the bound in bare CR lines", []string{": ping\r: " + strings.Repeat("p", 2<<10) + "\r\r", end}, 0, ErrMalformedAnswer},
		// JSON, as the lines join with "\n": only its size is wrong.
		{"an event over the bound in short lines", []string{"event: message\ndata: {\n" + strings.Repeat("data:         \n", 200) + "data: }\n\n", end}, 0, ErrMalformedAnswer},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) { sse(w, tt.chunks...) })
			c.maxAnswer = 1 << 10
			evs, errs := collect(t, c.InvokeStream(context.Background(), "f1", nil))
			if len(evs) != tt.events {
				t.Errorf("events %v, want %d", evs, tt.events)
			}
			if tt.wantErr == nil {
				if len(errs) != 0 {
					t.Errorf("errors %v", errs)
				}
				if len(evs) == 0 || evs[len(evs)-1].Event() != "end" {
					t.Errorf("events %v do not end with end", evs)
				}
				return
			}
			if len(errs) != 1 || !errors.Is(errs[0], tt.wantErr) || !errors.Is(errs[0], ErrStreamDropped) {
				t.Errorf("errors %v, want one %v", errs, tt.wantErr)
			}
		})
	}
	t.Run("a line without end", func(t *testing.T) {
		t.Parallel()
		var sent atomic.Int64
		c, _, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) { endless(w, "text/event-stream", &sent) })
		c.maxAnswer = 1 << 20
		_, errs := collect(t, c.InvokeStream(context.Background(), "f1", nil))
		if len(errs) != 1 || !errors.Is(errs[0], ErrMalformedAnswer) {
			t.Errorf("errors %v, want ErrMalformedAnswer", errs)
		}
		if n := sent.Load(); n > unbounded {
			t.Errorf("the server sent %d bytes", n)
		}
	})
}

// TestStreamStalledIsCanceled: a stream that stops sending is ended by its
// context, and the connection is let go.
func TestStreamStalledIsCanceled(t *testing.T) {
	t.Parallel()
	c, hungUp := holding(t, "event: run_start\ndata: {\"run_id\":\"r1\"}\n\n: ping\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errs []error
	for ev, err := range c.InvokeStream(ctx, "f1", nil) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, ok := ev.(*RunStart); ok {
			time.AfterFunc(50*time.Millisecond, cancel)
		}
	}
	if len(errs) != 1 || !errors.Is(errs[0], ErrStreamDropped) || !errors.Is(errs[0], context.Canceled) {
		t.Errorf("errors %v, want ErrStreamDropped and context.Canceled", errs)
	}
	hungUp()
}

// TestUnsendableIdempotencyKey: a key that cannot go in a header fails at
// once, with no attempt and no wait; one the server may refuse is sent.
func TestUnsendableIdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"a\nb", "a\x00", "tab\there", "caf\u00e9", "del\x7f"} {
		c, rec, waits := server(t, func(w http.ResponseWriter, r *http.Request, n int) { writeJSON(w, 201, sentMessage) })
		_, err := c.SendMessage(context.Background(), SendMessageRequest{ConversationID: "c1", Text: "hi"}, WithIdempotencyKey(key))
		if err == nil || !strings.Contains(err.Error(), "Idempotency-Key") {
			t.Errorf("key %q: error %v", key, err)
		}
		if n := len(rec.all()); n != 0 || len(*waits) != 0 {
			t.Errorf("key %q: %d attempts, waits %v; want none", key, n, *waits)
		}
	}
	c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) { writeJSON(w, 201, sentMessage) })
	if _, err := c.SendMessage(context.Background(), SendMessageRequest{ConversationID: "c1", Text: "hi"}, WithIdempotencyKey("order 42/~!")); err != nil || len(rec.all()) != 1 {
		t.Errorf("a printable key: %v, %d attempts", err, len(rec.all()))
	}
}

// TestAnswersWithoutTheirProperties: JSON of the right shape that lacks
// what every answer of its kind carries ({} for a page, a run, a stream
// event) is an error wrapping ErrMalformedAnswer, not zero values.
func TestAnswersWithoutTheirProperties(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	call := func(f func(c *Client) error) func(c *Client) error { return f }
	for _, tt := range []struct {
		name   string
		answer any
		call   func(c *Client) error
	}{
		{"me", map[string]any{}, call(func(c *Client) error { _, err := c.Me(ctx); return err })},
		{"a conversation page", map[string]any{"next_before": nil}, call(func(c *Client) error {
			_, err := c.ListConversations(ctx, ConversationsParams{})
			return err
		})},
		{"a message page", map[string]any{}, call(func(c *Client) error { _, err := c.ListMessages(ctx, "c1", MessagesParams{}); return err })},
		{"a sent message", map[string]any{"message": map[string]any{}}, call(func(c *Client) error {
			_, err := c.SendMessage(ctx, SendMessageRequest{ConversationID: "c1", Text: "hi"})
			return err
		})},
		{"a sent message null", map[string]any{"message": nil}, call(func(c *Client) error {
			_, err := c.SendMessage(ctx, SendMessageRequest{ConversationID: "c1", Text: "hi"})
			return err
		})},
		{"a sent image", map[string]any{}, call(func(c *Client) error {
			_, err := c.SendImage(ctx, SendImageRequest{ConversationID: "c1", ImageURL: "https://example.com/i.png"})
			return err
		})},
		{"a comment", map[string]any{"comment": map[string]any{}}, call(func(c *Client) error { _, err := c.Comment(ctx, "k1"); return err })},
		{"a private reply", map[string]any{}, call(func(c *Client) error { _, err := c.PrivateReply(ctx, "k1", "hi"); return err })},
		{"a saved webhook", map[string]any{}, call(func(c *Client) error { _, err := c.SaveWebhook(ctx, "https://example.com/h"); return err })},
		{"a test delivery", map[string]any{"delivery": map[string]any{}}, call(func(c *Client) error { _, err := c.TestWebhook(ctx); return err })},
		{"a run", map[string]any{}, call(func(c *Client) error { _, err := c.Invoke(ctx, "f1", nil); return err })},
		{"a run's trace", map[string]any{}, call(func(c *Client) error { _, err := c.Run(ctx, "f1", "r1"); return err })},
		{"a channel in the list", map[string]any{"channels": []any{map[string]any{"id": "ch1"}, map[string]any{}}}, call(func(c *Client) error {
			_, err := c.Channels(ctx)
			return err
		})},
		{"a flow in the list", map[string]any{"flows": []any{map[string]any{}}}, call(func(c *Client) error { _, err := c.Flows(ctx); return err })},
		{"a conversation in a page", map[string]any{"conversations": []any{map[string]any{}}, "next_before": nil}, call(func(c *Client) error {
			_, err := c.ListConversations(ctx, ConversationsParams{})
			return err
		})},
		{"a message in a page", map[string]any{"messages": []any{map[string]any{"id": "m1"}, map[string]any{"text": "hi"}}}, call(func(c *Client) error {
			_, err := c.ListMessages(ctx, "c1", MessagesParams{})
			return err
		})},
		{"a delivery in a page", map[string]any{"deliveries": []any{map[string]any{}}}, call(func(c *Client) error {
			_, err := c.ListDeliveries(ctx, DeliveriesParams{})
			return err
		})},
		// The answers that hold another answer hold it whole, as the
		// document requires: {} is no message, comment, webhook or run.
		{"a channel of me", map[string]any{"workspace": map[string]any{"id": "w1"}, "channels": []any{map[string]any{}}}, call(func(c *Client) error {
			_, err := c.Me(ctx)
			return err
		})},
		{"a sent image's message", map[string]any{"message": map[string]any{}, "messages": []any{}}, call(func(c *Client) error {
			_, err := c.SendImage(ctx, SendImageRequest{ConversationID: "c1", ImageURL: "https://example.com/i.png"})
			return err
		})},
		{"a sent image's message null", map[string]any{"message": nil, "messages": []any{}}, call(func(c *Client) error {
			_, err := c.SendImage(ctx, SendImageRequest{ConversationID: "c1", ImageURL: "https://example.com/i.png"})
			return err
		})},
		{"a sent image's listed message", map[string]any{"message": map[string]any{"id": "m1"}, "messages": []any{map[string]any{"id": "m1"}, map[string]any{}}}, call(func(c *Client) error {
			_, err := c.SendImage(ctx, SendImageRequest{ConversationID: "c1", ImageURL: "https://example.com/i.png"})
			return err
		})},
		{"a public reply's comment", map[string]any{"ok": true, "comment": map[string]any{}}, call(func(c *Client) error {
			_, err := c.ReplyToComment(ctx, "k1", "hi")
			return err
		})},
		{"a private reply's comment", map[string]any{"ok": true, "comment": map[string]any{}}, call(func(c *Client) error {
			_, err := c.PrivateReply(ctx, "k1", "hi")
			return err
		})},
		{"a saved webhook's webhook", map[string]any{"webhook": map[string]any{}, "secret": "whsec_1"}, call(func(c *Client) error {
			_, err := c.SaveWebhook(ctx, "https://example.com/h")
			return err
		})},
		{"a trace's run", map[string]any{"run": map[string]any{}, "node_runs": []any{}}, call(func(c *Client) error {
			_, err := c.Run(ctx, "f1", "r1")
			return err
		})},
		// A run's messages are read as a stream's message events are.
		{"a run's message", map[string]any{"status": "completed", "run_id": "r1", "messages": []any{map[string]any{}}}, call(func(c *Client) error {
			_, err := c.Invoke(ctx, "f1", nil)
			return err
		})},
		{"a stream's replayed message", map[string]any{"status": "completed", "run_id": "r1", "messages": []any{map[string]any{"type": "text"}, map[string]any{}}}, call(func(c *Client) error {
			for _, err := range c.InvokeStream(ctx, "f1", nil) {
				if err != nil {
					return err
				}
			}
			return nil
		})},
		// The calls that answer {"ok": true} read it: a proxy's page or
		// {} is not the removal or the indicator done.
		{"a removed webhook", map[string]any{}, call(func(c *Client) error { return c.DeleteWebhook(ctx) })},
		{"a typing indicator", map[string]any{}, call(func(c *Client) error { return c.SendTyping(ctx, "c1") })},
		{"a stream's replay", map[string]any{}, call(func(c *Client) error {
			for _, err := range c.InvokeStream(ctx, "f1", nil) {
				if err != nil {
					return err
				}
			}
			return nil
		})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, rec, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) { writeJSON(w, 200, tt.answer) })
			if err := tt.call(c); !errors.Is(err, ErrMalformedAnswer) {
				t.Fatalf("error %v, want ErrMalformedAnswer", err)
			}
			if n := len(rec.all()); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
		})
	}
	const start, end = "event: run_start\ndata: {\"run_id\":\"r\"}\n\n", "event: end\ndata: {\"status\":\"completed\"}\n\n"
	for name, event := range map[string]string{
		"run_start":  "event: run_start\ndata: {}\n\n",
		"node_start": "event: node_start\ndata: {}\n\n",
		"message":    "data: {}\n\n",
		"node_end":   "event: node_end\ndata: {\"type\":\"llm\"}\n\n",
		"end":        "event: end\ndata: {}\n\n",
	} {
		t.Run("a stream's "+name+" event", func(t *testing.T) {
			t.Parallel()
			chunks := []string{start, event, end}
			if name == "run_start" {
				chunks = chunks[1:]
			}
			c, _, _ := server(t, func(w http.ResponseWriter, r *http.Request, n int) { sse(w, chunks...) })
			_, errs := collect(t, c.InvokeStream(ctx, "f1", nil))
			if len(errs) != 1 || !errors.Is(errs[0], ErrMalformedAnswer) || !errors.Is(errs[0], ErrStreamDropped) {
				t.Errorf("errors %v, want ErrMalformedAnswer", errs)
			}
		})
	}
}
