package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	yaml "go.yaml.in/yaml/v4"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/ratelimit"
)

// sharedDocument is loaded once for the tests that only read it.
var sharedDocument = sync.OnceValues(Load)

func load(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := sharedDocument()
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestDocumentLoadsAndValidates(t *testing.T) {
	t.Parallel()
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatal("kin-openapi does not read the document as 3.1")
	}
	// Each Load is the caller's own: changing one must not change the next.
	doc.Info.Title = "changed"
	if again, err := Load(); err != nil || again.Info.Title == "changed" {
		t.Fatal("Load returned a shared document")
	}
}

// TestJSONIsTheSameDocument checks that JSON is the YAML, converted whole,
// and that kin-openapi reads it as it reads the YAML.
func TestJSONIsTheSameDocument(t *testing.T) {
	t.Parallel()
	var fromYAML, fromJSON any
	if err := yaml.Unmarshal(YAML(), &fromYAML); err != nil {
		t.Fatal(err)
	}
	// Through JSON once, so that both sides hold JSON's types.
	roundTripped, err := json.Marshal(fromYAML)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(roundTripped, &fromYAML); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(JSON(), &fromJSON); err != nil {
		t.Fatalf("JSON() is not JSON: %v", err)
	}
	if !reflect.DeepEqual(fromYAML, fromJSON) {
		t.Fatal("JSON() differs from the YAML document")
	}
	if !bytes.HasPrefix(JSON(), []byte(`{"openapi":"3.1.0","info":{"title":`)) {
		t.Errorf("JSON() does not keep the YAML's order of keys: %.60s…", JSON())
	}
	if !bytes.Equal(JSON(), JSON()) || &JSON()[0] != &JSON()[0] {
		t.Fatal("JSON() is converted more than once")
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(JSON())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatal(err)
	}
	// kin-openapi reads both into the same document.
	fromJSONDoc, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	fromYAMLDoc, err := json.Marshal(load(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromJSONDoc, fromYAMLDoc) {
		t.Fatal("kin-openapi reads JSON() differently from the YAML")
	}
}

// operation is one operation of the document: a path's or a webhook's.
type operation struct {
	where string // "GET /me", "webhook test"
	op    *openapi3.Operation
}

func operations(doc *openapi3.T) []operation {
	var out []operation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			out = append(out, operation{method + " " + path, op})
		}
	}
	for name, item := range doc.Webhooks {
		for method, op := range item.Operations() {
			out = append(out, operation{"webhook " + name + " " + method, op})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].where < out[j].where })
	return out
}

func isWebhook(o operation) bool { return strings.HasPrefix(o.where, "webhook ") }

// secured reports whether the operation needs the API key.
func secured(doc *openapi3.T, op *openapi3.Operation) bool {
	if op.Security != nil {
		return len(*op.Security) > 0
	}
	return len(doc.Security) > 0
}

func TestEveryOperationIsDescribed(t *testing.T) {
	t.Parallel()
	doc := load(t)
	ids := map[string]string{}
	for _, o := range operations(doc) {
		op := o.op
		if op.OperationID == "" {
			t.Errorf("%s: no operationId", o.where)
		} else if other, dup := ids[op.OperationID]; dup {
			t.Errorf("%s: operationId %s is also %s's", o.where, op.OperationID, other)
		}
		ids[op.OperationID] = o.where
		if strings.TrimSpace(op.Summary) == "" {
			t.Errorf("%s: no summary", o.where)
		}
		if len(op.Tags) == 0 {
			t.Errorf("%s: no tag", o.where)
		}
		var success bool
		for status := range op.Responses.Map() {
			if strings.HasPrefix(status, "2") {
				success = true
			}
		}
		if !success {
			t.Errorf("%s: no 2xx response", o.where)
		}
		if isWebhook(o) || !secured(doc, op) {
			continue
		}
		// What the gateway can answer on any authenticated route.
		for _, status := range []int{401, 403, 429, 500, 503} {
			if op.Responses.Status(status) == nil {
				t.Errorf("%s: no %d response", o.where, status)
			}
		}
		for _, status := range []int{408, 413} {
			if op.RequestBody != nil && op.Responses.Status(status) == nil {
				t.Errorf("%s takes a body but has no %d response", o.where, status)
			}
		}
	}
}

// codesOf lists the error codes a response's JSON schema allows: the enum
// or const of its code property, through allOf.
func codesOf(s *openapi3.SchemaRef) []string {
	if s == nil || s.Value == nil {
		return nil
	}
	var out []string
	if code := s.Value.Properties["code"]; code != nil && code.Value != nil {
		for _, v := range code.Value.Enum {
			out = append(out, fmt.Sprint(v))
		}
		if code.Value.Const != nil {
			out = append(out, fmt.Sprint(code.Value.Const))
		}
	}
	for _, sub := range s.Value.AllOf {
		out = append(out, codesOf(sub)...)
	}
	return out
}

// errorCodes is every status and code an operation lists.
func errorCodes(op *openapi3.Operation) map[int][]string {
	out := map[int][]string{}
	for status, resp := range op.Responses.Map() {
		n, err := strconv.Atoi(status)
		if err != nil || n < 400 || resp.Value == nil {
			continue
		}
		if mt := resp.Value.Content.Get("application/json"); mt != nil {
			out[n] = codesOf(mt.Schema)
		}
	}
	return out
}

// wantCodes is what each route answers besides the gateway's own refusals
// (401 unauthorized, 403 module_inactive, 429 rate_limited, 408
// request_timeout, 413 payload_too_large, 500 internal_error, 503
// service_unavailable), as read
// from the services' handlers.
var wantCodes = map[string]map[int][]string{
	"getMe":             {},
	"listChannels":      {},
	"listConversations": {400: {errs.CodeInvalidRequest}},
	"listMessages":      {400: {errs.CodeInvalidRequest}, 404: {"conversation_not_found"}},
	"sendMessage":       sendCodes,
	"sendImage":         sendCodes,
	"sendCarousel":      sendCodes,
	"sendTyping": {
		400: {errs.CodeInvalidRequest, "tag_unsupported"},
		404: {"conversation_not_found"},
		409: {"outside_messaging_window"},
		501: {"platform_unsupported"},
		502: {errs.CodePlatformError},
	},
	"getComment": {404: {"comment_not_found"}},
	"replyToComment": {
		400: {errs.CodeInvalidRequest, "tag_unsupported", idempotency.CodeKeyInvalid},
		404: {"comment_not_found"},
		409: {idempotency.CodeInProgress, idempotency.CodeResponseUnavailable},
		422: {idempotency.CodeKeyReuse},
		502: {errs.CodePlatformError},
	},
	"privateReplyToComment": {
		400: {errs.CodeInvalidRequest, "tag_unsupported", idempotency.CodeKeyInvalid},
		404: {"comment_not_found"},
		409: {"private_reply_used", "private_reply_expired", idempotency.CodeInProgress, idempotency.CodeResponseUnavailable},
		422: {idempotency.CodeKeyReuse},
		429: {"private_reply_commenter_window", "private_reply_daily_cap", errs.CodeRateLimited},
		502: {errs.CodePlatformError},
	},
	"saveWebhook":    {400: {errs.CodeInvalidRequest}},
	"getWebhook":     {404: {"webhook_not_found"}},
	"deleteWebhook":  {404: {"webhook_not_found"}},
	"sendTestEvent":  {404: {"webhook_not_found"}},
	"listDeliveries": {400: {errs.CodeInvalidRequest}},
	"listFlows":      {404: {errs.CodeNotFound}},
	"invokeFlow": {
		400: {errs.CodeInvalidRequest, "input_invalid", idempotency.CodeKeyInvalid},
		403: {errs.CodeModuleInactive},
		404: {errs.CodeNotFound, "flow_not_found", "session_not_found"},
		409: {"session_busy", idempotency.CodeInProgress, idempotency.CodeResponseUnavailable},
		410: {"session_expired"},
		422: {"flow_not_invokable", idempotency.CodeKeyReuse},
		429: {"concurrency_limited", "daily_invoke_cap", errs.CodeRateLimited},
		503: {"guard_not_wired", errs.CodeServiceUnavailable},
	},
	"getFlowRun": {404: {errs.CodeNotFound, "run_not_found"}},
}

var sendCodes = map[int][]string{
	400: {errs.CodeInvalidRequest, "tag_unsupported", idempotency.CodeKeyInvalid},
	404: {"conversation_not_found"},
	409: {"outside_messaging_window", idempotency.CodeInProgress, idempotency.CodeResponseUnavailable},
	422: {idempotency.CodeKeyReuse},
	501: {"platform_unsupported"},
	502: {errs.CodePlatformError},
}

var gatewayCodes = map[int]string{
	401: errs.CodeUnauthorized,
	403: errs.CodeModuleInactive,
	408: errs.CodeRequestTimeout,
	413: errs.CodePayloadTooLarge,
	429: errs.CodeRateLimited,
	500: errs.CodeInternal,
	503: errs.CodeServiceUnavailable,
}

func TestEveryErrorCodeIsListedWithItsStatus(t *testing.T) {
	t.Parallel()
	doc := load(t)
	seen := map[string]bool{}
	for _, o := range operations(doc) {
		if isWebhook(o) || !secured(doc, o.op) {
			continue
		}
		id := o.op.OperationID
		want, ok := wantCodes[id]
		if !ok {
			t.Errorf("%s (%s): not in this test's table; add what the route answers", o.where, id)
			continue
		}
		seen[id] = true
		got := errorCodes(o.op)
		for status, codes := range got {
			if len(codes) == 0 {
				t.Errorf("%s: %d lists no error code", o.where, status)
			}
		}
		for status, codes := range want {
			for _, code := range codes {
				if !slices.Contains(got[status], code) {
					t.Errorf("%s: %d does not list %s (lists %v)", o.where, status, code, got[status])
				}
			}
		}
		for status, code := range gatewayCodes {
			if (status == 408 || status == 413) && o.op.RequestBody == nil {
				continue
			}
			if !slices.Contains(got[status], code) {
				t.Errorf("%s: %d does not list %s (lists %v)", o.where, status, code, got[status])
			}
		}
		// Nothing listed that the route cannot answer.
		for status, codes := range got {
			for _, code := range codes {
				if !slices.Contains(want[status], code) && gatewayCodes[status] != code {
					t.Errorf("%s: %d lists %s, which the route does not answer", o.where, status, code)
				}
			}
		}
	}
	for id := range wantCodes {
		if !seen[id] {
			t.Errorf("operation %s is in this test's table but not in the document", id)
		}
	}
}

func TestErrorResponsesUseTheErrorShape(t *testing.T) {
	t.Parallel()
	doc := load(t)
	errorSchema := doc.Components.Schemas["Error"]
	if errorSchema == nil || !slices.Equal(errorSchema.Value.Required, []string{"code", "message"}) {
		t.Fatal("components.schemas.Error must require code and message")
	}
	for _, o := range operations(doc) {
		for status, resp := range o.op.Responses.Map() {
			n, err := strconv.Atoi(status)
			if err != nil || n < 400 {
				continue
			}
			mt := resp.Value.Content.Get("application/json")
			if mt == nil {
				t.Errorf("%s: %s has no JSON body", o.where, status)
				continue
			}
			body := map[string]any{"code": "x", "message": "y"}
			for _, code := range codesOf(mt.Schema) {
				body["code"] = code
				if err := mt.Schema.Value.VisitJSON(body, openapi3.EnableJSONSchema2020()); err != nil {
					t.Errorf("%s: %s refuses an error body with code %s: %v", o.where, status, code, err)
				}
			}
			body["code"] = "no_such_code"
			if mt.Schema.Value.VisitJSON(body, openapi3.EnableJSONSchema2020()) == nil {
				t.Errorf("%s: %s accepts any code", o.where, status)
			}
			delete(body, "message")
			body["code"] = codesOf(mt.Schema)[0]
			if mt.Schema.Value.VisitJSON(body, openapi3.EnableJSONSchema2020()) == nil {
				t.Errorf("%s: %s accepts an error without message", o.where, status)
			}
		}
	}
}

func TestRateLimitAndRetryHeaders(t *testing.T) {
	t.Parallel()
	doc := load(t)
	headerNames := []string{ratelimit.HeaderLimit, ratelimit.HeaderRemaining, ratelimit.HeaderReset}
	for _, o := range operations(doc) {
		if isWebhook(o) {
			continue
		}
		for status, resp := range o.op.Responses.Map() {
			h := resp.Value.Headers
			if h["X-Request-Id"] == nil {
				t.Errorf("%s %s: no X-Request-Id", o.where, status)
			}
			if !secured(doc, o.op) {
				continue
			}
			for _, name := range []string{"Deprecation", "Link"} {
				if h[name] == nil {
					t.Errorf("%s %s: no %s (the /api/v1 alias)", o.where, status, name)
				}
			}
			if strings.HasPrefix(status, "2") {
				for _, name := range headerNames {
					if h[name] == nil || !h[name].Value.Required {
						t.Errorf("%s %s: %s not listed as always sent", o.where, status, name)
					}
				}
			}
			switch status {
			case "401":
				if h["WWW-Authenticate"] == nil {
					t.Errorf("%s 401: no WWW-Authenticate", o.where)
				}
			case "429", "503":
				if h[ratelimit.HeaderRetryAfter] == nil {
					t.Errorf("%s %s: no Retry-After", o.where, status)
				}
			}
		}
	}
}

// keyedOperations take Idempotency-Key.
var keyedOperations = []string{
	"POST /carousel", "POST /comments/{id}/private-reply", "POST /comments/{id}/reply",
	"POST /flows/{id}/invoke", "POST /image", "POST /messages",
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	doc := load(t)
	var keyed []string
	for _, o := range operations(doc) {
		p := o.op.Parameters.GetByInAndName("header", idempotency.Header)
		if p == nil {
			continue
		}
		keyed = append(keyed, o.where)
		s := p.Schema.Value
		if s.MaxLength == nil || *s.MaxLength != idempotency.MaxKeyLength {
			t.Errorf("%s: Idempotency-Key maxLength is not %d", o.where, idempotency.MaxKeyLength)
		}
		for key, ok := range map[string]bool{
			"order-1001":           true,
			"a key with spaces ~!": true,
			strings.Repeat("k", idempotency.MaxKeyLength):   true,
			strings.Repeat("k", idempotency.MaxKeyLength+1): false,
			"tab\there": false,
			"ключ":      false,
			"":          false,
		} {
			err := s.VisitJSON(key, openapi3.EnableJSONSchema2020())
			if (err == nil) != ok {
				t.Errorf("%s: Idempotency-Key %q accepted = %v, want %v", o.where, key, err == nil, ok)
			}
			if (idempotency.CheckKey(key) == nil) != ok && key != "" {
				t.Errorf("the service's check of %q disagrees with the document", key)
			}
		}
		replayed := false
		for status, resp := range o.op.Responses.Map() {
			if strings.HasPrefix(status, "2") && resp.Value.Headers[idempotency.ReplayedHeader] != nil {
				replayed = true
			}
		}
		if !replayed {
			t.Errorf("%s: no %s header on its 2xx", o.where, idempotency.ReplayedHeader)
		}
	}
	if !slices.Equal(keyed, keyedOperations) {
		t.Errorf("Idempotency-Key on %v, want %v", keyed, keyedOperations)
	}
}

// TestEveryRefResolves walks the document as data, so that a $ref kin-openapi
// might not follow (under an extension, in an example) is checked too.
func TestEveryRefResolves(t *testing.T) {
	t.Parallel()
	var tree any
	if err := json.Unmarshal(JSON(), &tree); err != nil {
		t.Fatal(err)
	}
	var refs int
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				refs++
				if _, err := pointer(tree, ref); err != nil {
					t.Errorf("%s: $ref %s: %v", at, ref, err)
				}
			}
			for k, e := range v {
				walk(e, at+"/"+k)
			}
		case []any:
			for i, e := range v {
				walk(e, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(tree, "#")
	if refs == 0 {
		t.Fatal("no $ref found; the walk is broken")
	}
}

// pointer resolves a local JSON pointer ("#/components/schemas/Error").
func pointer(tree any, ref string) (any, error) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("not a local reference")
	}
	at := tree
	for _, token := range strings.Split(rest, "/") {
		token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
		m, ok := at.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%q is inside a non-object", token)
		}
		if at, ok = m[token]; !ok {
			return nil, fmt.Errorf("no %q", token)
		}
	}
	return at, nil
}

// strict is how the requests and responses of the API are validated: JSON
// Schema 2020-12, as openapi3filter does for a 3.1 document, with formats
// checked, uuid included (kin-openapi leaves it out unless asked; Parley's
// ids are UUIDs of RFC 9562, v7 among them).
var strict = []openapi3.SchemaValidationOption{
	openapi3.EnableJSONSchema2020(),
	openapi3.EnableFormatValidation(),
	openapi3.WithStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562)),
}

// TestExamplesValidate checks every example against its schema the way
// responses will be checked, beyond what Validate does: schema-level
// examples, and media-type examples under JSON Schema 2020-12 with formats.
func TestExamplesValidate(t *testing.T) {
	t.Parallel()
	doc := load(t)
	var checked int
	check := func(where string, schema *openapi3.SchemaRef, example any) {
		t.Helper()
		checked++
		if err := schema.Value.VisitJSON(example, strict...); err != nil {
			t.Errorf("%s: example does not validate: %v", where, err)
		}
	}
	content := func(where string, c openapi3.Content) {
		for mediaType, mt := range c {
			if mt.Example != nil {
				check(where+" "+mediaType, mt.Schema, mt.Example)
			}
			for name, ex := range mt.Examples {
				check(where+" "+mediaType+" "+name, mt.Schema, ex.Value.Value)
			}
		}
	}
	for _, o := range operations(doc) {
		if o.op.RequestBody != nil {
			content(o.where+" request", o.op.RequestBody.Value.Content)
		}
		for status, resp := range o.op.Responses.Map() {
			content(o.where+" "+status, resp.Value.Content)
		}
	}
	for name, s := range doc.Components.Schemas {
		for i, ex := range s.Value.Examples {
			check(fmt.Sprintf("schema %s example %d", name, i), s, ex)
		}
	}
	for name, h := range doc.Components.Headers {
		for i, ex := range h.Value.Schema.Value.Examples {
			check(fmt.Sprintf("header %s example %d", name, i), h.Value.Schema, ex)
		}
	}
	if checked < 30 {
		t.Fatalf("only %d examples checked; the walk is broken", checked)
	}
}

// TestBrokenExampleIsRefused makes sure Load's validation really checks
// examples, so TestDocumentLoadsAndValidates means what it says.
func TestBrokenExampleIsRefused(t *testing.T) {
	t.Parallel()
	broken := bytes.Replace(YAML(), []byte("api_version: v1\n"), []byte("api_version: v2\n"), 1)
	if bytes.Equal(broken, YAML()) {
		t.Fatal("the /me example moved; update this test")
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(broken)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Validate(loader.Context) == nil {
		t.Fatal("an example that breaks its schema passed validation")
	}
}

func TestResponsesValidateAsServed(t *testing.T) {
	t.Parallel()
	doc := load(t)
	schema := func(path, method string, status int) *openapi3.Schema {
		t.Helper()
		op := doc.Paths.Find(path).GetOperation(method)
		return op.Responses.Status(status).Value.Content.Get("application/json").Schema.Value
	}
	for _, tt := range []struct {
		name   string
		schema *openapi3.Schema
		body   string
		ok     bool
	}{
		{"first page", schema("/conversations", http.MethodGet, 200), `{"conversations":[],"next_before":null}`, true},
		{"next_before a time", schema("/conversations", http.MethodGet, 200), `{"conversations":[],"next_before":"2026-11-22T10:00:00.123456Z"}`, true},
		{"next_before missing", schema("/conversations", http.MethodGet, 200), `{"conversations":[]}`, false},
		{"next_before not a time", schema("/conversations", http.MethodGet, 200), `{"conversations":[],"next_before":"yesterday"}`, false},
		{"a field added later", schema("/channels", http.MethodGet, 200), `{"channels":[],"later":1}`, true},
		{"delivery never delivered", schema("/webhook/test", http.MethodPost, 200),
			`{"delivery":{"id":"0b5d3c86-6f0e-4d4a-9a47-1f2b7b9c0a15","event":"test","payload":"{}","status":"failed","attempts":1,"response_status":null,"last_error":"dial tcp: connection refused","delivered_at":null,"created_at":"2026-11-22T10:00:00Z"}}`, true},
		{"invoke failed", schema("/flows/{id}/invoke", http.MethodPost, 200),
			`{"status":"failed","run_id":"r","output":{},"messages":[],"usage":{"tokens":0,"cost_usd":0,"billable_units":0},"error":{"code":"node_failed","message":"m"}}`, true},
		{"invoke status unknown", schema("/flows/{id}/invoke", http.MethodPost, 200),
			`{"status":"done","run_id":"r","output":{},"messages":[],"usage":{"tokens":0,"cost_usd":0,"billable_units":0}}`, false},
		{"idempotency_response_unavailable with run_id", schema("/flows/{id}/invoke", http.MethodPost, 409),
			`{"code":"idempotency_response_unavailable","message":"m","run_id":"0192f3a4-0000-7000-8000-00000000d003"}`, true},
		{"trace node without input", schema("/flows/{id}/runs/{runId}", http.MethodGet, 200),
			`{"run":{"id":"r","flow_id":"f","status":"waiting","current_node_id":"ask","nodes_executed":1,"vars":{},"output":{},"started_at":"2026-11-22T10:00:00Z"},"node_runs":[{"node_id":"start","node_type":"start","started_at":"2026-11-22T10:00:00Z","duration_ms":0,"input":null,"output":null,"tokens":0,"cost_usd":0}]}`, true},
	} {
		var body any
		if err := json.Unmarshal([]byte(tt.body), &body); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		err := tt.schema.VisitJSON(body, strict...)
		if (err == nil) != tt.ok {
			t.Errorf("%s: valid = %v, want %v (%v)", tt.name, err == nil, tt.ok, err)
		}
	}
}

func TestRequestBounds(t *testing.T) {
	t.Parallel()
	doc := load(t)
	schemas := doc.Components.Schemas
	button := `{"type":"postback","title":"t","payload":"p"}`
	card := `{"title":"t","buttons":[` + button + `]}`
	repeat := func(s string, n int) string { return strings.TrimSuffix(strings.Repeat(s+",", n), ",") }
	for _, tt := range []struct {
		name, schema, body string
		ok                 bool
	}{
		{"text", "SendMessageRequest", `{"conversation_id":"c","text":"hi"}`, true},
		{"no text", "SendMessageRequest", `{"conversation_id":"c"}`, false},
		{"3 buttons", "SendMessageRequest", `{"conversation_id":"c","text":"hi","buttons":[` + repeat(button, 3) + `]}`, true},
		{"4 buttons", "SendMessageRequest", `{"conversation_id":"c","text":"hi","buttons":[` + repeat(button, 4) + `]}`, false},
		{"14 quick replies", "SendMessageRequest", `{"conversation_id":"c","text":"hi","quick_replies":[` + repeat(`"q"`, 14) + `]}`, false},
		{"10 cards", "SendCarouselRequest", `{"conversation_id":"c","elements":[` + repeat(card, 10) + `]}`, true},
		{"11 cards", "SendCarouselRequest", `{"conversation_id":"c","elements":[` + repeat(card, 11) + `]}`, false},
		{"no cards", "SendCarouselRequest", `{"conversation_id":"c","elements":[]}`, false},
		{"80-character title", "SendCarouselRequest", `{"conversation_id":"c","elements":[{"title":"` + strings.Repeat("é", 80) + `"}]}`, true},
		{"81-character title", "SendCarouselRequest", `{"conversation_id":"c","elements":[{"title":"` + strings.Repeat("é", 81) + `"}]}`, false},
		{"invoke", "InvokeRequest", `{"input":{"name":"Ada"}}`, true},
		{"invoke without input", "InvokeRequest", `{"stream":true}`, false},
		{"invoke input not an object", "InvokeRequest", `{"input":[1]}`, false},
	} {
		var body any
		if err := json.Unmarshal([]byte(tt.body), &body); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		err := schemas[tt.schema].Value.VisitJSON(body, strict...)
		if (err == nil) != tt.ok {
			t.Errorf("%s: valid = %v, want %v (%v)", tt.name, err == nil, tt.ok, err)
		}
	}
	limit := doc.Components.Parameters["Limit"].Value.Schema.Value
	if *limit.Min != 1 || *limit.Max != 100 || limit.Default != float64(50) {
		t.Errorf("limit is %v..%v default %v, want 1..100 default 50", *limit.Min, *limit.Max, limit.Default)
	}
}

func TestWebhookEvents(t *testing.T) {
	t.Parallel()
	doc := load(t)
	var kinds []string
	for _, v := range doc.Components.Schemas["EventKind"].Value.Enum {
		kinds = append(kinds, v.(string))
	}
	var webhooks []string
	for name, item := range doc.Webhooks {
		webhooks = append(webhooks, name)
		op := item.Post
		if op == nil {
			t.Errorf("webhook %s: no POST", name)
			continue
		}
		for _, h := range []string{"X-Service-Event", "X-Service-Delivery", "X-Service-Timestamp", "X-Service-Signature"} {
			if p := op.Parameters.GetByInAndName("header", h); p == nil || !p.Required {
				t.Errorf("webhook %s: %s not a required header", name, h)
			}
		}
		body := op.RequestBody.Value.Content.Get("application/json")
		if got := body.Schema.Value.Properties["event"].Value.Const; got != name {
			t.Errorf("webhook %s: envelope event is %v", name, got)
		}
		// Each event's body is also a WebhookEnvelope, what a delivery's
		// payload holds.
		if err := doc.Components.Schemas["WebhookEnvelope"].Value.VisitJSON(body.Example, strict...); err != nil {
			t.Errorf("webhook %s: its example is no WebhookEnvelope: %v", name, err)
		}
	}
	payload := doc.Components.Schemas["Delivery"].Value.Properties["payload"].Value
	example := doc.Paths.Find("/webhook/test").Post.Responses.Status(200).Value.Content.Get("application/json").Example
	var envelope any
	if err := json.Unmarshal([]byte(example.(map[string]any)["delivery"].(map[string]any)["payload"].(string)), &envelope); err != nil {
		t.Fatal(err)
	}
	if err := payload.ContentSchema.Value.VisitJSON(envelope, strict...); err != nil {
		t.Errorf("the test delivery's payload is not its contentSchema: %v", err)
	}
	slices.Sort(kinds)
	slices.Sort(webhooks)
	if !slices.Equal(kinds, webhooks) {
		t.Errorf("webhooks %v, event kinds %v", webhooks, kinds)
	}
}

func TestRunEvents(t *testing.T) {
	t.Parallel()
	doc := load(t)
	var names []string
	for _, branch := range doc.Components.Schemas["RunEvent"].Value.OneOf {
		names = append(names, fmt.Sprint(branch.Value.Properties["event"].Value.Const))
	}
	if want := []string{"run_start", "node_start", "message", "node_end", "end"}; !slices.Equal(names, want) {
		t.Errorf("RunEvent branches %v, want %v", names, want)
	}
	invoke := doc.Paths.Find("/flows/{id}/invoke").Post.Responses.Status(200).Value
	stream := invoke.Content.Get("text/event-stream")
	if stream == nil {
		t.Fatal("invoke has no text/event-stream answer")
	}
	// The example stream's events, parsed, are RunEvents.
	runEvent := doc.Components.Schemas["RunEvent"].Value
	var parsed int
	for _, block := range strings.Split(stream.Example.(string), "\n\n") {
		var event, data string
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				event = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = v
			}
		}
		if event == "" {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Fatalf("event %s: %v", event, err)
		}
		if err := runEvent.VisitJSON(map[string]any{"event": event, "data": v}, strict...); err != nil {
			t.Errorf("event %s of the example stream: %v", event, err)
		}
		parsed++
	}
	if parsed < 5 {
		t.Errorf("the example stream has %d events", parsed)
	}
}

// A run's status is one of three values wherever it appears: the invoke's
// answer, the stream's end and the run's trace (a run is stored only once
// its call has ended, so a trace never shows one under way).
func TestRunStatusHasThreeValues(t *testing.T) {
	t.Parallel()
	doc := load(t)
	trace := doc.Components.Schemas["Trace"].Value.Properties["run"].Value.Properties["status"]
	for name, s := range map[string]*openapi3.SchemaRef{
		"RunStatus":        doc.Components.Schemas["RunStatus"],
		"Trace.run.status": trace,
	} {
		var got []string
		for _, v := range s.Value.Enum {
			got = append(got, fmt.Sprint(v))
		}
		if want := []string{"completed", "waiting", "failed"}; !slices.Equal(got, want) {
			t.Errorf("%s: enum %v, want %v", name, got, want)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		yaml, want string
	}{
		{"b: 1\na: [x, 2.5, true, null, '3']\n", `{"b":1,"a":["x",2.5,true,null,"3"]}`},
		{"t: 2026-11-22T10:00:00Z\nv: 3.1.0\n", `{"t":"2026-11-22T10:00:00Z","v":"3.1.0"}`},
		{"a: &x {k: v}\nb: *x\n", `{"a":{"k":"v"},"b":{"k":"v"}}`},
		{"s: |+\n  line\n\n", `{"s":"line\n\n"}`},
		{"<<: {k: v}\n", ""},
		{"? [a]\n: 1\n", ""},
	} {
		var root yaml.Node
		if err := yaml.Unmarshal([]byte(tt.yaml), &root); err != nil {
			t.Fatalf("%q: %v", tt.yaml, err)
		}
		var out bytes.Buffer
		err := writeJSON(&out, &root)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%q: converted to %s, want an error", tt.yaml, out.String())
		case tt.want != "" && err != nil:
			t.Errorf("%q: %v", tt.yaml, err)
		case tt.want != "" && out.String() != tt.want:
			t.Errorf("%q: got %s, want %s", tt.yaml, out.String(), tt.want)
		}
	}
}
