// Package metafake is a stand-in for Meta's Graph API that speaks its real
// JSON: sends to /me/messages answer {"recipient_id", "message_id"}, comment
// replies answer {"id"}, profile reads answer the user's fields, and a
// refusal is {"error": {"message", "type", "code", "error_subcode"}}. Every
// call is recorded, so tests (end to end, and messaging's own) check what
// the platform received. It also signs webhook posts as Meta does, for
// driving /ingress/meta.
package metafake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Call is one Graph API request the fake received.
type Call struct {
	Method string
	// Path is the path under the version prefix, e.g. /me/messages.
	Path        string
	Query       url.Values
	AccessToken string
	Body        map[string]any
}

// GraphError is a refusal in the Graph API's shape.
type GraphError struct {
	Status   int
	Message  string
	Type     string
	Code     int
	Subcode  int
	FBTrace  string // "AbCdEfGh123" when empty
	Sticky   bool   // keep refusing; otherwise only the next matching call
	matchFor string
}

// Profile is what GET /{user-id} returns for a customer.
type Profile struct {
	ID         string `json:"id,omitempty"`
	FirstName  string `json:"first_name,omitempty"`
	LastName   string `json:"last_name,omitempty"`
	Name       string `json:"name,omitempty"`
	Username   string `json:"username,omitempty"`
	ProfilePic string `json:"profile_pic,omitempty"`
}

// Server is the fake Graph API.
type Server struct {
	mu         sync.Mutex
	calls      []Call
	failures   []GraphError
	profiles   map[string]Profile
	commenters map[string]string
	hold       chan struct{}
	next       int
}

// New returns an empty fake.
func New() *Server { return &Server{profiles: map[string]Profile{}, commenters: map[string]string{}} }

// Start serves a new fake until the test ends and returns it with its base
// URL (the root: paths are as under a version prefix, and one added to the
// URL, such as /v21.0, is dropped).
func Start(t testing.TB) (*Server, string) {
	s := New()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// SetCommenter makes a private reply to commentID (recipient.comment_id)
// answer psid as its recipient_id, as Meta names the comment's author; the
// same person has the same PSID on every comment. Without it the answer is
// "psid-of-<comment id>".
func (s *Server) SetCommenter(commentID, psid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commenters[commentID] = psid
}

// Hold makes every call from now on wait (after it is recorded) until the
// returned release is called, so a test can act while a call is in flight.
func (s *Server) Hold() (release func()) {
	hold := make(chan struct{})
	s.mu.Lock()
	s.hold = hold
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.hold == hold {
				s.hold = nil
			}
			s.mu.Unlock()
			close(hold)
		})
	}
}

// SetProfile makes GET /{userID} answer p.
func (s *Server) SetProfile(userID string, p Profile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.profiles[userID] = p
}

// FailNext makes the next call whose path starts with pathPrefix answer e
// (every such call, when e.Sticky).
func (s *Server) FailNext(pathPrefix string, e GraphError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.matchFor = pathPrefix
	s.failures = append(s.failures, e)
}

// Calls returns the calls received so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsTo returns the calls whose path starts with prefix.
func (s *Server) CallsTo(prefix string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if strings.HasPrefix(c.Path, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// ServeHTTP answers Graph API calls. Paths are as under the version prefix
// (the base URL given to Parley ends in /v21.0 or is the fake's root).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if i := strings.Index(path[1:], "/"); i >= 0 && strings.HasPrefix(path, "/v") && strings.Contains(path[:i+1], ".") {
		path = path[i+1:] // drop a /v21.0 prefix
	}
	token := r.URL.Query().Get("access_token")
	if token == "" {
		if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			token = bearer
		}
	}
	call := Call{Method: r.Method, Path: path, Query: r.URL.Query(), AccessToken: token, Body: map[string]any{}}
	if raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20)); len(raw) > 0 {
		if err := json.Unmarshal(raw, &call.Body); err != nil {
			writeError(w, GraphError{Status: 400, Message: "(#100) Invalid JSON body", Type: "OAuthException", Code: 100})
			return
		}
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.next++
	n := s.next
	var fail *GraphError
	for i, f := range s.failures {
		if strings.HasPrefix(path, f.matchFor) {
			f := f
			fail = &f
			if !f.Sticky {
				s.failures = append(s.failures[:i], s.failures[i+1:]...)
			}
			break
		}
	}
	profile, hasProfile := s.profiles[strings.TrimPrefix(path, "/")]
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}

	if token == "" {
		writeError(w, GraphError{Status: 400, Message: "An access token is required to request this resource.", Type: "OAuthException", Code: 104})
		return
	}
	if fail != nil {
		writeError(w, *fail)
		return
	}
	switch {
	case r.Method == http.MethodPost && path == "/me/messages":
		recipient := ""
		if rc, ok := call.Body["recipient"].(map[string]any); ok {
			if id, ok := rc["id"].(string); ok {
				recipient = id
			} else if cid, ok := rc["comment_id"].(string); ok {
				s.mu.Lock()
				recipient = s.commenters[cid]
				s.mu.Unlock()
				if recipient == "" {
					recipient = "psid-of-" + cid
				}
			}
		}
		if _, action := call.Body["sender_action"]; action {
			writeJSON(w, map[string]any{"recipient_id": recipient})
			return
		}
		writeJSON(w, map[string]any{"recipient_id": recipient, "message_id": fmt.Sprintf("m_fake_%d", n)})
	case r.Method == http.MethodPost && (strings.HasSuffix(path, "/comments") || strings.HasSuffix(path, "/replies")):
		writeJSON(w, map[string]any{"id": fmt.Sprintf("reply_%d", n)})
	case r.Method == http.MethodGet && hasProfile:
		writeJSON(w, profile)
	default:
		writeError(w, GraphError{Status: 400, Message: "Unsupported request - method type: " + strings.ToLower(r.Method), Type: "GraphMethodException", Code: 100, Subcode: 33})
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e GraphError) {
	status := e.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	trace := e.FBTrace
	if trace == "" {
		trace = "AbCdEfGh123"
	}
	body := map[string]any{"message": e.Message, "type": e.Type, "code": e.Code, "fbtrace_id": trace}
	if e.Subcode != 0 {
		body["error_subcode"] = e.Subcode
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": body})
}

// OutsideWindow is Meta's refusal of a send outside the 24-hour window.
func OutsideWindow() GraphError {
	return GraphError{Status: 400, Message: "(#10) This message is sent outside of allowed window.", Type: "OAuthException", Code: 10, Subcode: 2018278}
}

// Sign returns the X-Hub-Signature-256 header Meta puts on a webhook post of
// body, signed with the app secret.
func Sign(appSecret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(appSecret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
