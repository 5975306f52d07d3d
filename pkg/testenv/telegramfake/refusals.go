package telegramfake

import "net/http"

// refusal is an answer queued by FailNext.
type refusal struct {
	method      string
	code        int
	description string
}

// FailNext makes the next call of method (sendMessage, sendPhoto, ...)
// refused the way Telegram refuses: HTTP status code and {"ok": false,
// "error_code": code, "description": description}, e.g. 403 "Forbidden: bot
// was blocked by the user". The call is still recorded. Refusals queued for
// one method are used in order, one per call.
func (s *Server) FailNext(method string, code int, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusals = append(s.refusals, refusal{method: method, code: code, description: description})
}

// refuse answers call with the first refusal queued for its method, if any.
func (s *Server) refuse(w http.ResponseWriter, method string) bool {
	s.mu.Lock()
	var r *refusal
	for i := range s.refusals {
		if s.refusals[i].method == method {
			found := s.refusals[i]
			r = &found
			s.refusals = append(s.refusals[:i], s.refusals[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	if r == nil {
		return false
	}
	writeError(w, r.code, r.description)
	return true
}
