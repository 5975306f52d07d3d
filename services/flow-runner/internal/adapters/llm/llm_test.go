package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/openaicompat"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

const testKey = "sk-live-SECRET-0123456789"

// reply is one answer of the fake provider.
type reply struct {
	status int
	header map[string]string
	body   string
	// hang holds the request until the client gives up on it.
	hang bool
	// drop closes the connection without an answer.
	drop bool
}

// received is what the fake provider was sent.
type received struct {
	path string
	auth string
	body map[string]any
}

// provider is a fake OpenAI-compatible chat-completions server: it answers
// each request with the next of its replies (the last one repeats) and
// keeps what it was sent.
type provider struct {
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	got     []received
}

func newProvider(t *testing.T, replies ...reply) *provider {
	t.Helper()
	p := &provider{replies: replies}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	p.mu.Lock()
	p.got = append(p.got, received{path: r.URL.Path, auth: r.Header.Get("Authorization"), body: body})
	next := p.replies[min(len(p.got), len(p.replies))-1]
	p.mu.Unlock()
	switch {
	case next.hang:
		<-r.Context().Done()
		return
	case next.drop:
		conn, _, _ := w.(http.Hijacker).Hijack()
		_ = conn.Close()
		return
	}
	for k, v := range next.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(cmpStatus(next.status))
	_, _ = w.Write([]byte(next.body))
}

func cmpStatus(s int) int {
	if s == 0 {
		return http.StatusOK
	}
	return s
}

func (p *provider) requests() []received {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]received(nil), p.got...)
}

// completion is a chat completion answering text with the given usage.
func completion(text string, prompt, completionTokens, total int) reply {
	return reply{body: fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini-2024-07-18",
		"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, text, prompt, completionTokens, total)}
}

func failure(status int, message string) reply {
	return reply{status: status, body: fmt.Sprintf(`{"error":{"message":%q,"type":"server_error"}}`, message)}
}

// ask is a request whose content does not matter to the test.
var ask = run.ChatRequest{Messages: []run.ChatMessage{{Role: run.RoleUser, Content: "x"}}}

func testPrices(t *testing.T) Prices {
	t.Helper()
	p, err := ParsePrices("gpt-4o-mini=0.15/0.60,gpt-4o=2.50/10.00")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newClient(p *provider, o Options) *Client {
	o.BaseURL = p.srv.URL + "/v1"
	if o.Model == "" {
		o.Model = "gpt-4o-mini"
	}
	if o.Backoff == 0 {
		o.Backoff = time.Millisecond
	}
	return New(o)
}

func TestRequestShape(t *testing.T) {
	t.Parallel()
	temp := 0.0
	tests := []struct {
		name     string
		key      string
		give     run.ChatRequest
		wantAuth string
		want     map[string]any
	}{
		{
			name:     "defaults",
			key:      testKey,
			give:     run.ChatRequest{Messages: []run.ChatMessage{{Role: run.RoleUser, Content: "hi"}}},
			wantAuth: "Bearer " + testKey,
			want:     map[string]any{"model": "gpt-4o-mini", "messages": []any{map[string]any{"role": "user", "content": "hi"}}},
		},
		{
			name: "everything set, no key",
			give: run.ChatRequest{
				Model:       "llama3.1",
				Messages:    []run.ChatMessage{{Role: run.RoleSystem, Content: "be brief"}, {Role: run.RoleUser, Content: "hi"}},
				Temperature: &temp, MaxTokens: 64, JSON: true,
			},
			want: map[string]any{
				"model": "llama3.1",
				"messages": []any{
					map[string]any{"role": "system", "content": "be brief"},
					map[string]any{"role": "user", "content": "hi"},
				},
				// A zero temperature is a setting, sent as such.
				"temperature": 0.0, "max_tokens": 64.0,
				"response_format": map[string]any{"type": "json_object"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, completion("hello", 1, 1, 2))
			c := newClient(p, Options{APIKey: tt.key, Prices: testPrices(t)})
			if _, err := c.Chat(t.Context(), tt.give); err != nil {
				t.Fatal(err)
			}
			got := p.requests()
			if len(got) != 1 || got[0].path != "/v1/chat/completions" || got[0].auth != tt.wantAuth {
				t.Fatalf("requests = %+v", got)
			}
			gotJSON, _ := json.Marshal(got[0].body)
			wantJSON, _ := json.Marshal(tt.want)
			if string(gotJSON) != string(wantJSON) {
				t.Fatalf("body = %s\nwant   %s", gotJSON, wantJSON)
			}
		})
	}
}

func TestTokensAndCost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		model      string
		give       reply
		wantTokens int
		wantCost   float64
	}{
		// 1000 × 0.15 / 1e6 + 500 × 0.60 / 1e6
		{"input and output", "", completion("a", 1000, 500, 1500), 1500, 0.00045},
		// 1200 × 2.50 / 1e6 + 345 × 10.00 / 1e6
		{"another model", "gpt-4o", completion("a", 1200, 345, 1545), 1545, 0.00645},
		{"total only, priced as input", "gpt-4o", reply{body: `{"choices":[{"message":{"content":"a"}}],"usage":{"total_tokens":2000}}`}, 2000, 0.005},
		{"parts only", "", reply{body: `{"choices":[{"message":{"content":"a"}}],"usage":{"prompt_tokens":10,"completion_tokens":20}}`}, 30, 0.0000135},
		{"no usage", "", reply{body: `{"choices":[{"message":{"content":"a"}}]}`}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(newProvider(t, tt.give), Options{Prices: testPrices(t)})
			req := ask
			req.Model = tt.model
			got, err := c.Chat(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			wantModel := tt.model
			if wantModel == "" {
				wantModel = "gpt-4o-mini"
			}
			// Exact: prices are summed in integers and divided once.
			if got.Text != "a" || got.Model != wantModel || got.Tokens != tt.wantTokens || got.CostUSD != tt.wantCost {
				t.Fatalf("reply = %+v, want %d tokens costing %v as %s", got, tt.wantTokens, tt.wantCost, wantModel)
			}
		})
	}
}

func TestUnpricedModelWarnsOnce(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.WarnLevel)
	c := newClient(newProvider(t, completion("a", 10, 10, 20)), Options{Prices: testPrices(t), Log: zap.New(core)})
	req := ask
	req.Model = "llama3.1"
	for range 3 {
		got, err := c.Chat(t.Context(), req)
		if err != nil || got.CostUSD != 0 || got.Tokens != 20 {
			t.Fatalf("Chat = %+v, %v", got, err)
		}
	}
	warned := logs.FilterMessageSnippet("no price").All()
	if len(warned) != 1 || warned[0].ContextMap()["model"] != "llama3.1" {
		t.Fatalf("warnings = %+v, want one naming llama3.1", logs.All())
	}
}

func TestRetriesRateLimit(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.WarnLevel)
	p := newProvider(t, failure(429, "Rate limit reached"), completion("after the wait", 1, 2, 3))
	c := newClient(p, Options{Prices: testPrices(t), Log: zap.New(core)})
	got, err := c.Chat(t.Context(), ask)
	if err != nil || got.Text != "after the wait" {
		t.Fatalf("Chat = %+v, %v", got, err)
	}
	if n := len(p.requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	retried := logs.FilterMessage("llm call retried").All()
	if len(retried) != 1 || !strings.Contains(retried[0].ContextMap()["reason"].(string), "HTTP 429: Rate limit reached") {
		t.Fatalf("logs = %+v, want one retry naming the 429", logs.All())
	}
}

func TestRetriesNoReply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		first reply
	}{
		{"connection dropped", reply{drop: true}},
		// The attempt's own timeout ends it; the run's time goes on.
		{"attempt timed out", reply{hang: true}},
		{"bad gateway", failure(502, "upstream down")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, tt.first, completion("ok", 1, 1, 2))
			c := newClient(p, Options{AttemptTimeout: 200 * time.Millisecond})
			got, err := c.Chat(t.Context(), ask)
			if err != nil || got.Text != "ok" || len(p.requests()) != 2 {
				t.Fatalf("Chat = %+v, %v after %d requests", got, err, len(p.requests()))
			}
		})
	}
}

func TestServerErrorsUntilTheDeadline(t *testing.T) {
	t.Parallel()
	// The provider echoes the key, as some proxies do.
	p := newProvider(t, failure(500, "The server is overloaded (key "+testKey+")"))
	c := newClient(p, Options{APIKey: testKey, Backoff: 5 * time.Millisecond})
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Chat(ctx, ask)
	if err == nil {
		t.Fatal("Chat succeeded against a failing provider")
	}
	msg := err.Error()
	if strings.Contains(msg, testKey) || !strings.Contains(msg, "HTTP 500: The server is overloaded (key "+openaicompat.Redacted+")") || !strings.Contains(msg, "attempts") {
		t.Fatalf("error %q: want the provider's reason, the attempts, and no key", msg)
	}
	if n := len(p.requests()); n < 3 {
		t.Fatalf("%d requests within 300ms at a 5ms backoff, want retries", n)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("gave up after %s, past the deadline", took)
	}
}

// The reason that came before the run's time ran out mid-call is the one
// reported, not "no answer in time".
func TestDeadlineMidCallKeepsTheLastReason(t *testing.T) {
	t.Parallel()
	p := newProvider(t, failure(503, "warming up"), reply{hang: true})
	c := newClient(p, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Chat(ctx, ask)
	if err == nil || !strings.Contains(err.Error(), "HTTP 503: warming up") || !strings.Contains(err.Error(), "the run's time ran out") {
		t.Fatalf("err = %v", err)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	limited := failure(429, "Rate limit reached")
	limited.header = map[string]string{"Retry-After": "1"}

	t.Run("honoured when it fits", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, limited, completion("ok", 1, 1, 2))
		c := newClient(p, Options{})
		start := time.Now()
		_, err := c.Chat(t.Context(), ask)
		// The backoff alone would have retried after a millisecond.
		if took := time.Since(start); err != nil || took < time.Second {
			t.Fatalf("Chat = %v after %s, want success after the 1s Retry-After", err, took)
		}
	})
	t.Run("given up at once when it does not fit", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, limited, completion("ok", 1, 1, 2))
		c := newClient(p, Options{})
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		_, err := c.Chat(ctx, ask)
		if err == nil || !strings.Contains(err.Error(), "HTTP 429: Rate limit reached (no time left to retry)") || len(p.requests()) != 1 {
			t.Fatalf("Chat = %v after %d requests", err, len(p.requests()))
		}
		if took := time.Since(start); took > 400*time.Millisecond {
			t.Fatalf("gave up after %s, want at once", took)
		}
	})
}

func TestNotRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give reply
		want string
	}{
		{"bad request", failure(400, "Invalid value for 'temperature'"), "HTTP 400: Invalid value for 'temperature'"},
		{"bad key echoed", failure(401, "Incorrect API key provided: "+testKey), "HTTP 401: Incorrect API key provided: " + openaicompat.Redacted},
		{"unknown model, plain error", reply{status: 404, body: `{"error":"model 'llama9' not found"}`}, "HTTP 404: model 'llama9' not found"},
		{"not json", reply{body: "<html>ok</html> " + testKey}, "not the JSON the API documents"},
		{"no choices", reply{body: `{"choices":[],"usage":{"total_tokens":3}}`}, "the reply has no choices"},
		{"no text", reply{body: `{"choices":[{"message":{"content":null,"tool_calls":[]},"finish_reason":"tool_calls"}]}`}, `no text (finish_reason "tool_calls")`},
		{"wrong types", reply{body: `{"choices":[{"message":{"content":42}}]}`}, "not the JSON the API documents"},
		{"too large", reply{body: `{"choices":[{"message":{"content":"` + strings.Repeat("a", openaicompat.MaxReplyBytes) + `"}}]}`}, "larger than 1 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, tt.give, completion("a retry would have got this", 1, 1, 2))
			c := newClient(p, Options{APIKey: testKey})
			_, err := c.Chat(t.Context(), ask)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), testKey) {
				t.Fatalf("err = %v, want one holding %q and not the key", err, tt.want)
			}
			if n := len(p.requests()); n != 1 {
				t.Fatalf("%d requests, want no retry", n)
			}
		})
	}
}

// A canceled run stops the retries at once, with the reason so far.
func TestCanceledDuringBackoff(t *testing.T) {
	t.Parallel()
	p := newProvider(t, failure(503, "busy"))
	// The retry's log line is written just before the backoff starts.
	backingOff := make(chan struct{}, 1)
	core, _ := observer.New(zapcore.WarnLevel)
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if e.Message == "llm call retried" {
			backingOff <- struct{}{}
		}
		return nil
	}))
	c := newClient(p, Options{Backoff: time.Hour, Log: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Chat(ctx, ask)
		done <- err
	}()
	select {
	case <-backingOff:
	case err := <-done:
		t.Fatalf("Chat returned before backing off: %v", err)
	}
	cancel()
	err := <-done
	var status *openaicompat.StatusError
	if !errors.As(err, &status) || status.Status != 503 || !strings.Contains(err.Error(), "the run was canceled") {
		t.Fatalf("err = %v", err)
	}
}
