package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// formFields are the names of every field of the console's forms and the
// query parameters its pages read: the sweep sends each of them hostile.
var formFields = []string{
	"until", "status", "since", "event", "url", "unanswered", "token", "to", "title", "text", "tags", "suggestion",
	"secret", "run_id", "quick_replies", "name", "mine", "me", "markdown", "kind", "handed_over", "from", "external_id",
	"edited", "document", "channel_id", "buttons", "assignee", "ai_mode", "text_0", "version", "before", "done",
	"conversation", "email", "password", "form_id",
}

// TestEveryRouteRefusesHostileInput sends every page and action of the
// console (routes(), as NewPublic routes them), signed in with a valid
// anti-forgery token, what a careless or hostile operator might: path ids
// that are no ids (not-a-uuid, a NUL, 2,000 characters, an escaped ../, a
// urn:uuid:, another workspace's), every query parameter and form field a
// NUL, 5,000 characters, a time, given twice. Each is answered as
// docs/console.md "Errors in words" says, a page or a redirect under 500,
// within the browser's timeout. The inbox's live stream, the sign-in form
// and sign-out are left out: the first never ends, the others have their
// own tests (TestSignInWithAnEmailNoOperatorHas, TestCSRFRefused).
func TestEveryRouteRefusesHostileInput(t *testing.T) {
	t.Parallel()
	_, ws, b := signedInToAcme(t)
	long := strings.Repeat("a", 2000)
	badIDs := []string{"not-a-uuid", "%00", long, "..%2F..", "urn:uuid:" + ws, uuid.NewString()}
	token := b.pageCSRF("/workspaces/" + ws)
	filled := func(value string) url.Values {
		f := url.Values{"csrf_token": {token}}
		for _, n := range formFields {
			f.Set(n, value)
		}
		return f
	}
	forms := map[string]url.Values{
		"no fields":     {"csrf_token": {token}},
		"a NUL":         filled("x\x00y"),
		"5,000 chars":   filled(strings.Repeat("z", 5000)),
		"a time":        filled("2026-01-01T00:00:00Z"),
		"not UTF-8":     filled("\xff\xfe"),
		"a negative":    filled("-1"),
		"twice":         {"csrf_token": {token}, "text": {"a", "b"}, "name": {"a", "b"}, "url": {"https://a.example", "x"}},
		"a huge number": filled("99999999999999999999999"),
	}
	queries := []string{
		"",
		"?" + strings.Join(formFields, "=%00&") + "=%00",
		"?" + strings.Join(formFields, "="+long+"&") + "=" + long,
		"?status=a&status=b&before=x&before=y&version=-1&version=2",
	}
	sent := 0
	for _, r := range routes() {
		if strings.HasPrefix(r.Path, "/static") || r.Path == "/logout" || r.Path == "/login" || strings.HasSuffix(r.Path, "/events") {
			continue
		}
		for _, p := range hostilePaths(r.Path, ws, badIDs) {
			if r.Method == http.MethodGet {
				for _, q := range queries {
					sent++
					if resp := b.get(p + q); resp.status >= 500 {
						t.Errorf("GET %.100s%.60s = %d: %.300s", p, q, resp.status, resp.body)
					}
				}
				continue
			}
			for what, form := range forms {
				sent++
				if resp := b.do(r.Method, p, form, nil); resp.status >= 500 {
					t.Errorf("%s %.100s with %s = %d: %.300s", r.Method, p, what, resp.status, resp.body)
				}
			}
		}
	}
	if sent < 500 {
		t.Fatalf("only %d requests sent: the routes were not found", sent)
	}
}

// hostilePaths is path with its parameters filled: the workspace's own id
// for :id with each bad id in every other parameter, and each bad id as the
// workspace with the others plain.
func hostilePaths(path, ws string, badIDs []string) []string {
	if !strings.Contains(path, ":") {
		return []string{path}
	}
	fill := func(p, id, others string) string {
		parts := strings.Split(p, "/")
		for i, s := range parts {
			switch {
			case s == ":id":
				parts[i] = id
			case strings.HasPrefix(s, ":"):
				parts[i] = others
			}
		}
		return strings.Join(parts, "/")
	}
	var out []string
	for _, bad := range badIDs {
		if strings.Count(path, ":") > 1 || !strings.Contains(path, ":id") {
			out = append(out, fill(path, ws, bad))
		}
		if strings.Contains(path, ":id") {
			out = append(out, fill(path, bad, "x"))
		}
	}
	return out
}
