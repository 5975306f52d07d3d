package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/testenv/apicheck"
)

// TestEveryDocumentedOperationIsServed sends each operation of the OpenAPI
// document through the built gateway (placeholders for path parameters, {}
// for a body) and wants an answer from a route: anything but the "no such
// route" 404 or a 405. Together with each service's
// TestPublicRoutesAreDocumented and the gateway's
// TestRoutingMatchesTheDocument, documented and served cannot drift apart:
// those see every route served, this sees every operation documented
// answered by the running whole. The answers themselves are validated as
// every answer of these tests is (gateways).
func TestEveryDocumentedOperationIsServed(t *testing.T) {
	t.Parallel()
	doc, s, key := documentedSuite(t)
	before := s.check.Exchanges()
	ops := doc.DocumentedRoutes()
	for _, op := range ops {
		path := strings.ReplaceAll(op.Path, "{}", "p1")
		var body io.Reader
		if op.Method == http.MethodPost || op.Method == http.MethodPut || op.Method == http.MethodPatch {
			body = strings.NewReader("{}")
		}
		req, err := http.NewRequest(op.Method, s.gatewayURL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var answer struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &answer)
		switch {
		case resp.StatusCode == http.StatusMethodNotAllowed,
			resp.StatusCode == http.StatusNotFound && strings.HasPrefix(answer.Message, "no such route"):
			t.Errorf("%s is documented, but %s %s answers %d %s", op, op.Method, path, resp.StatusCode, raw)
		default:
			t.Logf("%s %s: %d %s", op.Method, path, resp.StatusCode, answer.Code)
		}
	}
	// The answers were validated too: the check is wired into the client.
	if n := s.check.Exchanges() - before; n != len(ops) {
		t.Errorf("%d of the %d answers were validated against the document", n, len(ops))
	}
}

// documentedSuite is the OpenAPI document, a running suite and an API key
// of a workspace with every module the document's operations need: what a
// test that walks every operation starts from.
func documentedSuite(t *testing.T) (*apicheck.Document, *suite, string) {
	t.Helper()
	doc, err := apicheck.Load()
	if err != nil {
		t.Fatal(err)
	}
	s := startSuite(t)
	_, key := s.flowDeveloper(t) // flows need the flows module to exist
	return doc, s, key
}
