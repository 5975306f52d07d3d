// Package telegramfake is a stand-in for the Telegram Bot API that speaks its
// real JSON: requests to /bot<token>/<method> are recorded and answered with
// Telegram's {"ok": true, "result": ...} envelope, or {"ok": false,
// "error_code", "description"} for an unknown token. The end-to-end and the
// messaging tests use it as the customer's side of Telegram, and `make run`
// starts it (e2e/cmd/telegram-sandbox) as a local sandbox when no real bot
// token is configured.
package telegramfake

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Call is one Bot API request the fake received.
type Call struct {
	Token  string
	Method string
	Params map[string]any
}

// Server answers Bot API calls for the bots whose tokens it knows (any token
// when Tokens is empty).
type Server struct {
	Tokens map[string]bool
	// OnCall, when set, sees every call as it arrives (the sandbox logs it).
	OnCall func(Call)
	// NoRecord keeps Calls empty, so a benchmark's many calls cost the
	// fake no memory.
	NoRecord bool

	mu       sync.Mutex
	calls    []Call
	nextID   int64
	refusals []refusal
	failure  *Failure
}

// Failure is how SetFailure answers every call: Status with the raw Body
// (which need not be Telegram's JSON: a proxy's HTML page is a failure
// too), or, with Drop, a connection closed without an answer.
type Failure struct {
	Status int
	Body   string
	Drop   bool
}

// SetFailure answers every call with f from now on (the call is still
// recorded), until SetFailure(nil).
func (s *Server) SetFailure(f *Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure = f
}

// LastMessageID is the message_id of the latest call, as a platform
// message id is stored: decimal.
func (s *Server) LastMessageID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.FormatInt(s.nextID, 10)
}

// Start serves a new fake until the test ends and returns it with its base
// URL, the TELEGRAM_API_BASE to give Parley.
func Start(t testing.TB) (*Server, string) {
	s := &Server{}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// Calls returns the calls received so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// ServeHTTP implements the Bot API's /bot<token>/<method> routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	if len(s.Tokens) > 0 && !s.Tokens[token] {
		writeError(w, http.StatusUnauthorized, "Unauthorized")
		return
	}
	params := map[string]any{}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	// The fake reads JSON bodies only; one not declared as JSON would be
	// misread by Telegram too, so a client that forgets the header shows.
	if len(body) > 0 && (!strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") || json.Unmarshal(body, &params) != nil) {
		writeError(w, http.StatusBadRequest, "Bad Request: can't parse JSON object")
		return
	}
	call := Call{Token: token, Method: method, Params: params}
	s.mu.Lock()
	if !s.NoRecord {
		s.calls = append(s.calls, call)
	}
	s.nextID++
	id := s.nextID
	failure := s.failure
	s.mu.Unlock()
	if s.OnCall != nil {
		s.OnCall(call)
	}
	switch {
	case failure != nil && failure.Drop:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // the server closes the connection
	case failure != nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(failure.Status)
		_, _ = io.WriteString(w, failure.Body)
		return
	}
	if s.refuse(w, method) {
		return
	}

	switch method {
	case "sendMessage", "sendPhoto":
		if params["chat_id"] == nil {
			writeError(w, http.StatusBadRequest, "Bad Request: chat_id is empty")
			return
		}
		result := map[string]any{
			"message_id": id,
			"from":       map[string]any{"id": 5550001, "is_bot": true, "first_name": "Parley", "username": "parley_test_bot"},
			"date":       time.Now().Unix(),
			"chat":       map[string]any{"id": params["chat_id"], "type": "private"},
		}
		if text, ok := params["text"]; ok {
			result["text"] = text
		}
		writeOK(w, result)
	case "sendChatAction", "answerCallbackQuery", "setWebhook":
		writeOK(w, true)
	default:
		writeError(w, http.StatusNotFound, "Not Found: method not found")
	}
}

func writeOK(w http.ResponseWriter, result any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func writeError(w http.ResponseWriter, code int, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": code, "description": description})
}
