package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/dribble"
	"github.com/parleyhq/parley/pkg/testenv/sse"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// readBound is HTTP_READ_TIMEOUT in these tests: short, so that they wait
// little for it; cutMargin is how long past it a connection may stay open
// (the answer, and the server closing).
const (
	readBound = 500 * time.Millisecond
	cutMargin = 3 * time.Second
)

var goroutinesMetric = regexp.MustCompile(`(?m)^go_goroutines (\d+)$`)

// goroutines is how many goroutines the service at addr runs, from its
// /metrics.
func goroutines(t *testing.T, addr string) int {
	t.Helper()
	n := metric(addr, goroutinesMetric)
	if n <= 0 {
		t.Fatalf("go_goroutines of %s: %v", addr, n)
	}
	return int(n)
}

// TestSlowClientsAreCutAtTheReadBound: clients that announce a body (of
// 100,000 bytes, or within the route's limit) and send a byte every
// 100 ms, 20 at once on each listener, before authentication and after
// it: where the route reads the body they are answered 408
// request_timeout at HTTP_READ_TIMEOUT, and where it refuses them first
// they are answered at once; either way their connections are closed, and
// the listeners' goroutines come back to what they were.
func TestSlowClientsAreCutAtTheReadBound(t *testing.T) {
	t.Parallel()
	// The refusals without a key are not to throttle the address.
	s := startSuite(t, "HTTP_READ_TIMEOUT="+readBound.String(), "AUTH_FAILURES_PER_MINUTE=1000")
	consoleURL := s.startConsole(t)
	wsID, key := s.developer(t)
	ch := s.addChannel(t, wsID, "external", "--kind", "webchat")
	token := s.visitorToken(t, ch.ID)

	gateway, messaging := strings.TrimPrefix(s.gatewayURL, "http://"), strings.TrimPrefix(s.messagingURL, "http://")
	console := strings.TrimPrefix(consoleURL, "http://")
	jsonBody := http.Header{"Content-Type": {"application/json"}}
	with := func(h http.Header, name, value string) http.Header {
		h = h.Clone()
		h.Set(name, value)
		return h
	}
	for _, tt := range []struct {
		name, addr string
		req        dribble.Request
		// answer is the status a connection gets before it closes: 408
		// where the route reads the body; a refusal otherwise, at once.
		answer int
	}{
		{"gateway, no key", gateway, dribble.Request{Method: http.MethodPost, Path: "/v1/messages", Header: jsonBody}, http.StatusUnauthorized},
		{"gateway, a wrong key", gateway, dribble.Request{Method: http.MethodPost, Path: "/v1/messages", Header: with(jsonBody, "Authorization", "Bearer pk_wrong")}, http.StatusUnauthorized},
		{"gateway, a good key", gateway, dribble.Request{Method: http.MethodPost, Path: "/v1/messages", Header: with(jsonBody, "Authorization", "Bearer "+key)}, http.StatusRequestTimeout},
		{"console, not signed in", console, dribble.Request{Method: http.MethodPost, Path: "/logout", Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}, http.StatusSeeOther},
		{"console sign-in", console, dribble.Request{Method: http.MethodPost, Path: "/login", Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}, http.StatusRequestTimeout},
		{"Meta ingress", messaging, dribble.Request{Method: http.MethodPost, Path: "/ingress/meta", Header: jsonBody}, http.StatusRequestTimeout},
		{"Telegram ingress, not a Telegram channel", messaging, dribble.Request{Method: http.MethodPost, Path: "/ingress/telegram/" + ch.ID, Header: jsonBody}, http.StatusNotFound},
		{"widget message, no visitor", messaging, dribble.Request{Method: http.MethodPost, Path: "/webchat/" + ch.ID + "/messages", Header: jsonBody, ContentLength: 10_000}, http.StatusUnauthorized},
		{"widget message, a visitor", messaging, dribble.Request{Method: http.MethodPost, Path: "/webchat/" + ch.ID + "/messages", Header: with(jsonBody, "X-Visitor-Token", token), ContentLength: 10_000}, http.StatusRequestTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const clients = 20
			baseline := goroutines(t, tt.addr)
			if tt.req.ContentLength == 0 {
				tt.req.ContentLength = 100_000
			}
			tt.req.Every = 100 * time.Millisecond
			results := make([]dribble.Result, clients)
			errs := make([]error, clients)
			var wg sync.WaitGroup
			for i := range clients {
				wg.Go(func() { results[i], errs[i] = dribble.Send(tt.addr, tt.req, readBound+cutMargin) })
			}
			wg.Wait()
			for i, res := range results {
				if errs[i] != nil {
					t.Fatalf("client %d: %v", i, errs[i])
				}
				// A refusal does not wait for the body; a route that reads
				// it gives it the whole bound.
				reads := tt.answer == http.StatusRequestTimeout
				if !res.Closed || reads && res.After < readBound || !reads && res.After > readBound {
					t.Fatalf("client %d: closed %v after %s; want closed %s %s (answered %d %s)",
						i, res.Closed, res.After, map[bool]string{true: "after", false: "before"}[reads], readBound, res.Status, res.Body)
				}
				if res.Status != tt.answer {
					t.Fatalf("client %d: answered %d %s, want %d", i, res.Status, res.Body, tt.answer)
				}
				if res.Status == http.StatusRequestTimeout && tt.addr != console && !bytes.Contains(res.Body, []byte(`"code":"request_timeout"`)) {
					t.Fatalf("client %d: 408 %s, want code request_timeout", i, res.Body)
				}
			}
			// What the connections held is let go. A few goroutines of
			// the service's own may come and go meanwhile.
			wait.For(t, 10*time.Second, tt.name+": goroutines back to "+fmt.Sprint(baseline), func() error {
				if n := goroutines(t, tt.addr); n > baseline+3 {
					return fmt.Errorf("%d goroutines", n)
				}
				return nil
			})
		})
	}
}

// TestStreamsOutliveTheReadBound: HTTP_READ_TIMEOUT bounds reading a
// request, never the answer: a streamed run relayed by the gateway and
// the widget's event stream go on well past it and deliver what comes
// then.
func TestStreamsOutliveTheReadBound(t *testing.T) {
	t.Parallel()
	s := startSuite(t, "HTTP_READ_TIMEOUT="+readBound.String(), "WEBHOOK_ALLOW_PRIVATE_TARGETS=true", "SSE_PING_INTERVAL=100ms")
	past := 4 * readBound

	t.Run("a streamed run", func(t *testing.T) {
		// The run waits at an http node until the stream is past the bound.
		release := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok": true}`)
		}))
		t.Cleanup(slow.Close)
		t.Cleanup(func() { closeOnce(release) })
		wsID, key := s.flowDeveloper(t)
		flowID := s.publishFlow(t, wsID, fmt.Sprintf(`{"name": "Slow", "triggers": ["api"], "nodes": [
			{"id": "start", "type": "start", "next": "call"},
			{"id": "call", "type": "http", "method": "GET", "url": %q, "timeout_ms": 10000, "save_as": "resp", "next": "done"},
			{"id": "done", "type": "end", "output": {"ok": "{{vars.resp.body.ok}}"}}]}`, slow.URL))

		req, err := http.NewRequest(http.MethodPost, s.gatewayURL+"/v1/flows/"+flowID+"/invoke", strings.NewReader(`{"input": {}, "stream": true}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream = %d %v", resp.StatusCode, resp.Header)
		}
		events := sse.NewReader(resp.Body)
		for {
			ev, err := events.Next()
			if err != nil {
				t.Fatalf("the stream ended %s after it started: %v", time.Since(start), err)
			}
			if time.Since(start) > past {
				closeOnce(release)
			}
			if ev.Name != "end" {
				continue
			}
			var end struct {
				Status string         `json:"status"`
				Output map[string]any `json:"output"`
			}
			if err := ev.JSON(&end); err != nil || end.Status != "completed" || end.Output["ok"] != true {
				t.Fatalf("end %s, %v", ev.Data, err)
			}
			if took := time.Since(start); took < past {
				t.Fatalf("the run ended after %s, before the test let it", took)
			}
			return
		}
	})

	t.Run("the widget's events", func(t *testing.T) {
		wsID, key := s.developer(t)
		ch := s.addChannel(t, wsID, "external", "--kind", "webchat")
		token := s.visitorToken(t, ch.ID)
		s.widgetSays(t, ch.ID, token, "Hello?")
		conversationID := s.onlyConversation(t, key)

		req, err := http.NewRequest(http.MethodGet, s.messagingURL+"/webchat/"+ch.ID+"/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Visitor-Token", token)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("events = %d", resp.StatusCode)
		}
		events := sse.NewReader(resp.Body)
		sent := false
		for {
			ev, err := events.Next()
			if err != nil {
				t.Fatalf("the stream ended %s after it started: %v", time.Since(start), err)
			}
			if !sent && time.Since(start) > past {
				sent = true
				status, _, out := s.api(t, key, http.MethodPost, "/v1/messages", map[string]any{"conversation_id": conversationID, "text": "Still here"})
				if status != http.StatusCreated {
					t.Fatalf("POST /v1/messages = %d %v", status, out)
				}
			}
			if ev.Name == "message" && strings.Contains(ev.Data, "Still here") {
				return
			}
		}
	})
}

// closeOnce closes c unless it is closed.
func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// visitorToken starts a widget visitor on webchat channel channelID.
func (s *suite) visitorToken(t *testing.T, channelID string) string {
	t.Helper()
	status, _, out := s.postWidget(t, "/webchat/"+channelID+"/session")
	token, _ := out["visitor_token"].(string)
	if status != http.StatusCreated || token == "" {
		t.Fatalf("widget session = %d %v", status, out)
	}
	return token
}

// widgetSays posts text as the visitor of token.
func (s *suite) widgetSays(t *testing.T, channelID, token, text string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"text": text})
	req, err := http.NewRequest(http.MethodPost, s.messagingURL+"/webchat/"+channelID+"/messages", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Visitor-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("widget message = %d %s", resp.StatusCode, raw)
	}
}

// onlyConversation is the id of the workspace's one conversation, once it
// is there.
func (s *suite) onlyConversation(t *testing.T, key string) string {
	t.Helper()
	var id string
	wait.For(t, 10*time.Second, "the conversation", func() error {
		status, _, out := s.api(t, key, http.MethodGet, "/v1/conversations?"+url.Values{"limit": {"1"}}.Encode(), nil)
		list, _ := out["conversations"].([]any)
		if status != http.StatusOK || len(list) != 1 {
			return fmt.Errorf("GET /v1/conversations = %d %v", status, out)
		}
		id, _ = list[0].(map[string]any)["id"].(string)
		return nil
	})
	return id
}
