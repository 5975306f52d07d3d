package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is Out for a server whose handlers write from their own
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func serve(t *testing.T) (*httptest.Server, *syncBuffer) {
	t.Helper()
	out := &syncBuffer{}
	srv := httptest.NewServer((&Sandbox{FlagWords: []string{"forbidden", "плохое слово"}, Out: out}).Handler())
	t.Cleanup(srv.Close)
	return srv, out
}

func post(t *testing.T, url, body string, out any) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return resp.StatusCode
}

type completion struct {
	Model   string
	Choices []struct {
		Message struct{ Role, Content string }
	}
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
}

// The prompts the flow-runner's intent and extract nodes send.
const (
	intentSystem = "Classify the customer's message into one of the intents below. Answer with a JSON object {\"intent\": \"<name>\"}, using \"none\" when none fits.\n" +
		"intents: order_status, refund, shipping\n" +
		"- order_status\n" +
		"- refund: money matters (examples: money back; return an order)\n" +
		"- shipping (examples: where is my parcel)\n"
	extractSystem = "Extract the fields below from the customer's message. Answer with a JSON object holding them; use null for a field the message does not give.\n" +
		"fields: name, email, amount, phone, when, agreed\n" +
		"- name (string): the customer's name [required]\n" +
		"- email (email)\n" +
		"- amount (number)\n" +
		"- phone (phone)\n" +
		"- when (date)\n" +
		"- agreed (boolean)\n"
)

// The system messages of an ai_response node (docs/chat.md "The chat-only
// nodes"): the instructions, then the passages found, or the line saying
// none matches.
const (
	assistantSystem = "You are the customer assistant of Demo. Answer the customer's message briefly and politely.\n\n" +
		"Knowledge base passages:\n\n" +
		"[1] Policy › Shipping\nOrders ship within 2 business days. Delivery takes 1 to 2\ndays in the capital.\n\n" +
		"[2] Policy › Returns\nYou can return an item within 30 days of delivery for a full refund. The\nitem must be unused; keep the receipt.\n\n" +
		"[3] Policy › Returns\nSale items can be returned within 14 days (a 1.5 kg box too). Gift cards cannot be returned."
	assistantNoPassages = "You are the customer assistant of Demo.\n\nKnowledge base passages: none matches the message."
)

func chat(system, user string, asJSON bool) string {
	req := map[string]any{"model": "sandbox-1", "messages": []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": user}}}
	if asJSON {
		req["response_format"] = map[string]string{"type": "json_object"}
	}
	b, _ := json.Marshal(req)
	return string(b)
}

func TestChat(t *testing.T) {
	t.Parallel()
	srv, out := serve(t)
	tests := []struct {
		name   string
		give   string
		want   string
		tokens [2]int
	}{
		{"plain echo", chat("Be brief.", "Hello\n  there,   friend", false), "[sandbox] echo: Hello there, friend", [2]int{5, 5}},
		{
			"from the passage sharing most words", chat(assistantSystem, "How long do I have to RETURN an item?", false),
			"[sandbox] From Policy › Returns: You can return an item within 30 days of delivery for a full refund.", [2]int{0, 0},
		},
		{
			"every sentence sharing as many", chat(assistantSystem, "are gift cards or sale items returned", false),
			"[sandbox] From Policy › Returns: Sale items can be returned within 14 days (a 1.5 kg box too). Gift cards cannot be returned.", [2]int{0, 0},
		},
		{
			"the first passage on a tie", chat(assistantSystem, "within days", false),
			"[sandbox] From Policy › Shipping: Orders ship within 2 business days.", [2]int{0, 0},
		},
		{
			"cut at 300 characters", chat("Knowledge base passages:\n[1] Long\n"+strings.Repeat("word ", 100), "word", false),
			"[sandbox] From Long: " + strings.Repeat("word ", 59) + "word…", [2]int{0, 0},
		},
		{
			"no passage matches", chat(assistantNoPassages, "What is the meaning of life?", false),
			"[sandbox] I don't know that one; no passage of the knowledge base matches your message. Shall I pass you to a person?", [2]int{0, 0},
		},
		{
			"no passage follows", chat("Knowledge base passages:\n", "hi", false),
			"[sandbox] I don't know that one; no passage of the knowledge base matches your message. Shall I pass you to a person?", [2]int{0, 0},
		},
		{"passages, as JSON", chat(assistantSystem, "hi", true), `{"_sandbox":true,"answer":"[sandbox] echo: hi"}`, [2]int{0, 0}},
		{"plain, long", chat("", strings.Repeat("ab ", 100), false), "[sandbox] echo: " + strings.Repeat("ab ", 66) + "ab…", [2]int{100, 69}},
		{"intent by name", chat(intentSystem, "What is my ORDER status?", true), `{"_sandbox":true,"intent":"order_status"}`, [2]int{0, 0}},
		{"intent by example", chat(intentSystem, "I want my money back!", true), `{"_sandbox":true,"intent":"refund"}`, [2]int{0, 0}},
		{"first intent wins", chat(intentSystem, "refund, or where is my parcel", true), `{"_sandbox":true,"intent":"refund"}`, [2]int{0, 0}},
		{"not a whole word", chat(intentSystem, "refunds? shipping-ish", true), `{"_sandbox":true,"intent":"shipping"}`, [2]int{0, 0}},
		{"no intent", chat(intentSystem, "hello", true), `{"_sandbox":true,"intent":"none"}`, [2]int{0, 0}},
		{
			"fields", chat(extractSystem, "I'm Bo and owe 42.5 USD; bo@example.com, call +1 (555) 010-9999 on 2026-05-01, yes", true),
			`{"_sandbox":true,"agreed":true,"amount":42.5,"email":"bo@example.com","name":"[sandbox] name","phone":"+1 (555) 010-9999","when":"2026-05-01"}`, [2]int{0, 0},
		},
		{
			"fields missing", chat(extractSystem, "nothing here", true),
			`{"_sandbox":true,"agreed":null,"amount":null,"email":null,"name":"[sandbox] name","phone":null,"when":null}`, [2]int{0, 0},
		},
		{"fields by name", chat("fields: contact_email, note", "write to a@b.io", true), `{"_sandbox":true,"contact_email":"a@b.io","note":"[sandbox] note"}`, [2]int{0, 0}},
		{"json, no convention", chat("", "hi", true), `{"_sandbox":true,"answer":"[sandbox] echo: hi"}`, [2]int{1, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got completion
			if status := post(t, srv.URL+"/v1/chat/completions", tt.give, &got); status != http.StatusOK || len(got.Choices) != 1 {
				t.Fatalf("%d %+v", status, got)
			}
			if got.Choices[0].Message.Content != tt.want || got.Choices[0].Message.Role != "assistant" || got.Model != "sandbox-1" {
				t.Fatalf("answer %q\nwant   %q", got.Choices[0].Message.Content, tt.want)
			}
			if tt.tokens != [2]int{0, 0} && (got.Usage.PromptTokens != tt.tokens[0] || got.Usage.CompletionTokens != tt.tokens[1]) {
				t.Fatalf("usage %+v, want %v", got.Usage, tt.tokens)
			}
			if got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
				t.Fatalf("usage %+v", got.Usage)
			}
		})
	}
	t.Run("prints each request", func(t *testing.T) {
		t.Parallel()
		var got completion
		post(t, srv.URL+"/v1/chat/completions", chat("sys", "printed line", true), &got)
		if !strings.Contains(out.String(), `chat model=sandbox-1 response_format=json_object messages=[{"role":"system","content":"sys"},{"role":"user","content":"printed line"}]`+"\n") {
			t.Fatalf("printed:\n%s", out)
		}
	})
}

func TestModerations(t *testing.T) {
	t.Parallel()
	srv, out := serve(t)
	tests := []struct {
		give string
		want []bool
	}{
		{`{"input": "a FORBIDDEN thing"}`, []bool{true}},
		{`{"input": "forbiddenness"}`, []bool{false}},
		{`{"input": ["ok", "это Плохое  слово"]}`, []bool{false, true}},
	}
	for _, tt := range tests {
		var got struct {
			Model   string
			Results []struct{ Flagged bool }
		}
		if status := post(t, srv.URL+"/v1/moderations", tt.give, &got); status != http.StatusOK || len(got.Results) != len(tt.want) {
			t.Fatalf("%s: %d %+v", tt.give, status, got)
		}
		for i, r := range got.Results {
			if r.Flagged != tt.want[i] {
				t.Errorf("%s: result %d flagged %v", tt.give, i, r.Flagged)
			}
		}
	}
	if !strings.Contains(out.String(), `moderation input="a FORBIDDEN thing" flagged=[true]`) {
		t.Fatalf("printed:\n%s", out)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t)
	tests := []struct{ path, give, want string }{
		{"/v1/chat/completions", `{"model":`, "not valid JSON"},
		{"/v1/chat/completions", `{"model": "m", "messages": []}`, "at least one message"},
		{"/v1/moderations", `{"input": 3}`, "string or a list"},
	}
	for _, tt := range tests {
		var got struct {
			Error struct{ Message string }
		}
		if status := post(t, srv.URL+tt.path, tt.give, &got); status != http.StatusBadRequest || !strings.Contains(got.Error.Message, tt.want) {
			t.Errorf("%s %s: %d %q", tt.path, tt.give, status, got.Error.Message)
		}
	}
}

func TestDelay(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer((&Sandbox{Delay: 100 * time.Millisecond, Out: io.Discard}).Handler())
	t.Cleanup(srv.Close)
	start := time.Now()
	var got completion
	if status := post(t, srv.URL+"/v1/chat/completions", chat("", "hi", false), &got); status != http.StatusOK {
		t.Fatal(status)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Fatalf("answered after %s, want the 100ms delay", took)
	}
}
