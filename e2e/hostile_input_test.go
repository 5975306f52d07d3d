package e2e

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/parleyhq/parley/pkg/testenv/apicheck"
)

// hostile is one bad request to an operation: what is wrong with it, and
// the request's parts.
type hostile struct {
	what        string
	path        string // under the gateway, query included
	body        string
	hasBody     bool
	contentType string
}

// TestEveryOperationRefusesHostileInput sends every operation of the
// OpenAPI document (apicheck's DocumentedRoutes) the bad input that
// applies to it, with a valid API key: path parameters that are no ids,
// bodies that are not the JSON object the operation takes (malformed, an
// array, a string, a string field of another type, empty, text/plain),
// and bad list parameters (limit out of range or not a number, before not
// a time, a parameter given twice). Each must be refused as
// docs/limits-and-errors.md "The error shape" says, with a code its "Error
// codes" list: under 500, never a 2xx, within the client's timeout. The
// answers go through the suite's apicheck transport, so each is also
// checked against the document.
func TestEveryOperationRefusesHostileInput(t *testing.T) {
	t.Parallel()
	codes := documentedCodes(t)
	doc, s, key := documentedSuite(t)
	client := &http.Client{Transport: http.DefaultClient.Transport, Timeout: 5 * time.Second}
	before := s.check.Exchanges()
	sent := 0
	for _, op := range doc.DocumentedRoutes() {
		item, operation := documentedOperation(doc, op)
		if operation == nil {
			t.Fatalf("%s: not found in the document", op)
		}
		for _, h := range hostileRequests(op, item, operation) {
			sent++
			var body io.Reader
			if h.hasBody {
				body = strings.NewReader(h.body)
			}
			req, err := http.NewRequest(op.Method, s.gatewayURL+h.path, body)
			if err != nil {
				t.Fatalf("%s %s: %v", op, h.what, err)
			}
			req.Header.Set("Authorization", "Bearer "+key)
			if h.contentType != "" {
				req.Header.Set("Content-Type", h.contentType)
			}
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("%s, %s: no answer: %v", op, h.what, err)
				continue
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Errorf("%s, %s: body after %s: %v", op, h.what, time.Since(start), err)
				continue
			}
			var answer map[string]any
			jsonErr := json.Unmarshal(raw, &answer)
			code, _ := answer["code"].(string)
			message, _ := answer["message"].(string)
			switch {
			case resp.StatusCode >= 500:
				t.Errorf("%s, %s (%s %s): %d %s", op, h.what, op.Method, h.path, resp.StatusCode, raw)
			case resp.StatusCode < 400:
				t.Errorf("%s, %s (%s %s): accepted with %d %s", op, h.what, op.Method, h.path, resp.StatusCode, raw)
			case !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || jsonErr != nil:
				t.Errorf("%s, %s: %d is not a JSON error (%s): %s", op, h.what, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
			case code == "" || message == "":
				t.Errorf("%s, %s: %d without a code and a message: %s", op, h.what, resp.StatusCode, raw)
			case !codes[code]:
				t.Errorf("%s, %s: %d code %q, which docs/limits-and-errors.md does not list", op, h.what, resp.StatusCode, code)
			default:
				t.Logf("%s, %s: %d %s", op, h.what, resp.StatusCode, code)
			}
		}
	}
	if sent == 0 {
		t.Fatal("no operation of the document takes anything to send hostile input to")
	}
	if n := s.check.Exchanges() - before; n != sent {
		t.Errorf("%d of the %d answers were validated against the document", n, sent)
	}
}

// documentedOperation is op's path item and operation in doc.
func documentedOperation(doc *apicheck.Document, op apicheck.Route) (*openapi3.PathItem, *openapi3.Operation) {
	param := regexp.MustCompile(`\{[^}/]+\}`)
	for path, item := range doc.T.Paths.Map() {
		if apicheck.BasePath+param.ReplaceAllString(path, "{}") == op.Path {
			return item, item.GetOperation(op.Method)
		}
	}
	return nil, nil
}

// hostileRequests is the bad input that applies to an operation.
func hostileRequests(op apicheck.Route, item *openapi3.PathItem, operation *openapi3.Operation) []hostile {
	params := map[string]*openapi3.Parameter{}
	for _, refs := range []openapi3.Parameters{item.Parameters, operation.Parameters} {
		for _, p := range refs {
			if p.Value != nil {
				params[p.Value.In+":"+p.Value.Name] = p.Value
			}
		}
	}
	withBody := operation.RequestBody != nil
	example := exampleBody(operation)
	placeholder := strings.ReplaceAll(op.Path, "{}", "p1")
	// fine is a request whose only fault is the one it names: its body,
	// if it takes one, is the document's example.
	fine := func(what, path string) hostile {
		h := hostile{what: what, path: path}
		if withBody {
			h.body, h.hasBody, h.contentType = example, true, "application/json"
		}
		return h
	}
	var out []hostile

	// Path parameters that are not ids, one segment at a time.
	segs := strings.Split(op.Path, "/")
	for i, seg := range segs {
		if seg != "{}" {
			continue
		}
		name := "path parameter " + segs[i-1] + "/{} "
		for _, v := range []struct{ what, value string }{
			{"not-a-uuid", "not-a-uuid"},
			{"%00", "%00"},
			{"a 2,000-character id", strings.Repeat("a", 2000)},
			{"../../etc", "../../etc"},
			{"../../etc escaped", url.PathEscape("../../etc")},
		} {
			p := slices.Clone(segs)
			p[i] = v.value
			out = append(out, fine(name+v.what, strings.ReplaceAll(strings.Join(p, "/"), "{}", "p1")))
		}
	}

	// Bodies that are not the JSON object the operation takes.
	if withBody {
		for _, b := range []struct{ what, body, contentType string }{
			{"malformed JSON body", `{"a":`, "application/json"},
			{"a JSON array body", `[]`, "application/json"},
			{"a JSON string body", `"hello"`, "application/json"},
			{"an empty body", ``, "application/json"},
			{"the example body as Content-Type text/plain", example, "text/plain"},
		} {
			out = append(out, hostile{what: b.what, path: placeholder, body: b.body, hasBody: true, contentType: b.contentType})
		}
		for _, field := range stringFields(operation.RequestBody.Value) {
			for _, v := range []struct{ what, value string }{{"a number", `12345`}, {"an object", `{"x":1}`}} {
				out = append(out, hostile{
					what:    "string field " + field + " sent as " + v.what,
					path:    placeholder,
					body:    `{"` + field + `":` + v.value + `}`,
					hasBody: true, contentType: "application/json",
				})
			}
		}
	}

	// List parameters out of their range or form.
	var query []string
	for k, p := range params {
		if p.In == "query" {
			query = append(query, strings.TrimPrefix(k, "query:"))
		}
	}
	slices.Sort(query)
	if slices.Contains(query, "limit") {
		for _, v := range []string{"-1", "abc", "100000"} {
			out = append(out, fine("limit="+v, placeholder+"?limit="+v))
		}
	}
	if slices.Contains(query, "before") {
		out = append(out, fine("before=garbage", placeholder+"?before=garbage"))
	}
	if len(query) > 0 {
		name := query[0]
		if slices.Contains(query, "limit") {
			name = "limit"
		}
		v1, v2 := "10", "20"
		if name != "limit" {
			v1, v2 = queryValues(params["query:"+name])
		}
		out = append(out, fine(name+" given twice", placeholder+"?"+name+"="+v1+"&"+name+"="+v2))
	}
	return out
}

// exampleBody is the first example of operation's JSON request body in
// the document, "{}" when it has none.
func exampleBody(operation *openapi3.Operation) string {
	if operation.RequestBody == nil || operation.RequestBody.Value == nil {
		return "{}"
	}
	mt := operation.RequestBody.Value.Content.Get("application/json")
	if mt == nil {
		return "{}"
	}
	value := mt.Example
	if value == nil && len(mt.Examples) > 0 {
		names := slices.Sorted(maps.Keys(mt.Examples))
		if ex := mt.Examples[names[0]]; ex.Value != nil {
			value = ex.Value.Value
		}
	}
	if value == nil {
		return "{}"
	}
	b, err := json.Marshal(value)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// queryValues is two different valid values of query parameter p.
func queryValues(p *openapi3.Parameter) (string, string) {
	if p.Schema != nil && p.Schema.Value != nil && len(p.Schema.Value.Enum) >= 2 {
		e := p.Schema.Value.Enum
		return url.QueryEscape(toString(e[0])), url.QueryEscape(toString(e[1]))
	}
	return "a", "b"
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// stringFields is the top-level string properties of a request body's
// JSON schema (its allOf's too), sorted.
func stringFields(body *openapi3.RequestBody) []string {
	if body == nil {
		return nil
	}
	mt := body.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return nil
	}
	var out []string
	var walk func(s *openapi3.Schema)
	walk = func(s *openapi3.Schema) {
		if s == nil {
			return
		}
		for name, p := range s.Properties {
			if p.Value != nil && p.Value.Type != nil && p.Value.Type.Is("string") && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
		for _, sub := range s.AllOf {
			walk(sub.Value)
		}
	}
	walk(mt.Schema.Value)
	slices.Sort(out)
	return out
}

// documentedCodes is every error code docs/limits-and-errors.md "Error
// codes" lists in its tables (the code column) and in its prose lists.
func documentedCodes(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile("../docs/limits-and-errors.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "\n## Error codes")
	if start < 0 {
		t.Fatal(`docs/limits-and-errors.md has no "Error codes" section`)
	}
	section := text[start+1:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	codes := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| *[0-9]{3} *\\| *`([a-z_]+)`")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		codes[m[1]] = true
	}
	if len(codes) < 10 {
		t.Fatalf("only %d codes in docs/limits-and-errors.md \"Error codes\": %v", len(codes), codes)
	}
	return codes
}
