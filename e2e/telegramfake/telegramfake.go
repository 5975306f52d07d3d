// Package telegramfake is a stand-in for the Telegram Bot API that speaks its
// real JSON: requests to /bot<token>/<method> are recorded and answered with
// Telegram's {"ok": true, "result": ...} envelope, or {"ok": false,
// "error_code", "description"} for an unknown token. The end-to-end tests use
// it as the customer's side of Telegram, and `make run` starts it as a local
// sandbox when no real bot token is configured.
package telegramfake

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
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

	mu       sync.Mutex
	calls    []Call
	nextID   int64
	refusals []refusal
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
	if len(body) > 0 && json.Unmarshal(body, &params) != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: can't parse JSON object")
		return
	}
	call := Call{Token: token, Method: method, Params: params}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	if s.OnCall != nil {
		s.OnCall(call)
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
