package openapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	parley "github.com/parleyhq/parley/sdk/go"
)

// The wire half of the contract with the Go client, which
// TestSDKCoversEveryOperation runs: the types compared in
// sdk_contract_test.go are only data until a method sends them. Each
// method of *parley.Client is called once with every argument set (every
// field of a params or request struct too) against a server that records
// the request, and what it sent is compared with its operation: the
// method and path, each query parameter, the Idempotency-Key and the
// body's properties, both ways. A query parameter added to the document
// with no way to send it fails, as does a params field the method drops.

// sdkHeadersNotSent are header parameters of the document the client
// leaves out, on purpose.
var sdkHeadersNotSent = map[string]string{
	// OpenAPIDocument returns the document whole; a conditional GET would
	// return nothing to a caller holding no earlier copy.
	"getOpenAPIDocument If-None-Match": "no cache in the client",
}

// sdkSent is one request a method of the client made.
type sdkSent struct {
	method, path string // path under /v1, escaped as sent
	query        map[string][]string
	header       http.Header
	body         map[string]json.RawMessage // nil when none
}

// sdkSends calls every method of a client of a recording server and
// returns what each sent, by method name.
func sdkSends(t *testing.T) map[string][]sdkSent {
	t.Helper()
	var mu sync.Mutex
	var last []sdkSent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		s := sdkSent{method: r.Method, path: strings.TrimPrefix(r.URL.EscapedPath(), "/v1"), query: r.URL.Query(), header: r.Header.Clone()}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &s.body); err != nil {
				t.Errorf("%s %s: a body that is not a JSON object: %s", r.Method, r.URL, raw)
			}
		}
		mu.Lock()
		last = append(last, s)
		mu.Unlock()
		// A final refusal: every method returns (or yields) it after one
		// attempt.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"code":"invalid_request","message":"recorded"}`)
	}))
	t.Cleanup(srv.Close)
	c := parley.New("pk_wire", parley.WithBaseURL(srv.URL), parley.WithRetry(parley.RetryPolicy{MaxAttempts: 1}))

	out := map[string][]sdkSent{}
	cv := reflect.ValueOf(c)
	for i := range cv.NumMethod() {
		m, name := cv.Method(i), cv.Type().Method(i).Name
		mt := m.Type()
		args := []reflect.Value{reflect.ValueOf(context.Background())}
		n := 0
		for j := 1; j < mt.NumIn(); j++ {
			if mt.IsVariadic() && j == mt.NumIn()-1 {
				break // call options: none
			}
			v := reflect.New(mt.In(j)).Elem()
			sdkFill(v, name, &n)
			args = append(args, v)
		}
		mu.Lock()
		last = nil
		mu.Unlock()
		results := m.Call(args)
		if seq := results[0]; seq.Kind() == reflect.Func {
			// An iterator: its loop makes the request; stop at the first item.
			yield := reflect.MakeFunc(seq.Type().In(0), func([]reflect.Value) []reflect.Value {
				return []reflect.Value{reflect.ValueOf(false)}
			})
			seq.Call([]reflect.Value{yield})
		}
		mu.Lock()
		out[name] = last
		mu.Unlock()
	}
	return out
}

// sdkFill sets v, and each field, item and value within it, to a value
// that is not its zero: strings are name-1, name-2, … in order.
func sdkFill(v reflect.Value, name string, n *int) {
	switch v.Kind() {
	case reflect.String:
		*n++
		v.SetString(fmt.Sprintf("%s-%d", strings.ToLower(name), *n))
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Interface:
		v.Set(reflect.ValueOf(map[string]any{"k": "v"}))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		sdkFill(p.Elem(), name, n)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		sdkFill(s.Index(0), name, n)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		sdkFill(k, name, n)
		sdkFill(e, name, n)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type() == timeType {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 22, 10, 0, 0, 500_000_000, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				sdkFill(v.Field(i), name, n)
			}
		}
	}
}

// TestSDKWireCheckBites proves the comparison sees a drift of either side:
// parameters and a body property added to a copy of the document, and a
// query parameter and the key dropped from what the client sent.
func TestSDKWireCheckBites(t *testing.T) {
	t.Parallel()
	doc, err := Load() // a fresh copy, this test's own
	if err != nil {
		t.Fatal(err)
	}
	list := doc.Paths.Value("/conversations").Get
	list.Parameters = append(list.Parameters, &openapi3.ParameterRef{Value: openapi3.NewQueryParameter("channel_id").WithSchema(openapi3.NewStringSchema())})
	typing := doc.Paths.Value("/typing").Post
	typing.Parameters = append(typing.Parameters, doc.Paths.Value("/messages").Post.Parameters...)
	doc.Components.Schemas["InvokeRequest"].Value.Properties["dry_run"] = openapi3.NewBoolSchema().NewRef()

	sends := sdkSends(t)
	for _, s := range sends["ListDeliveries"] {
		delete(s.query, "event")
	}
	for _, s := range sends["Deliveries"] {
		delete(s.query, "event")
	}
	for _, s := range sends["ReplyToComment"] {
		s.header.Del("Idempotency-Key")
	}
	sends["Me"][0].query["verbose"] = []string{"1"}

	sdkWantReported(t, sdkWireProblems(doc, sends),
		"listConversations query channel_id: no method of the client sends it",
		"sendTyping: SendTyping sends no Idempotency-Key",
		"invokeFlow body dry_run: no method of the client sends it",
		"listDeliveries query event: no method of the client sends it",
		"replyToComment: ReplyToComment sends no Idempotency-Key",
		"getMe: Me sends query verbose, which the document does not have",
	)
}

// sdkWireProblems is every difference between doc and what the client's
// methods sent (sdkSends).
func sdkWireProblems(doc *openapi3.T, sends map[string][]sdkSent) []string {
	var out []string
	report := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			row, ok := sdkOperations[op.OperationID]
			if !ok {
				continue // sdkProblems reports it
			}
			params := slices.Concat(item.Parameters, op.Parameters)
			re := regexp.MustCompile("^" + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(path), `[^/]+`) + "$")
			query, body := map[string]bool{}, map[string]bool{}
			for _, name := range row.methods {
				sent := sends[name]
				if len(sent) != 1 {
					report("%s: %s made %d requests, want 1", op.OperationID, name, len(sent))
					continue
				}
				s := sent[0]
				if s.method != method || !re.MatchString(s.path) {
					report("%s: %s sent %s %s, not %s %s", op.OperationID, name, s.method, s.path, method, path)
				}
				if got, want := s.header.Get("Authorization") != "", secured(doc, op); got != want {
					report("%s: %s sends Authorization %v, the document's security says %v", op.OperationID, name, got, want)
				}
				for q, vs := range s.query {
					query[q] = true
					p := params.GetByInAndName(openapi3.ParameterInQuery, q)
					if p == nil {
						report("%s: %s sends query %s, which the document does not have", op.OperationID, name, q)
						continue
					}
					if problem := sdkQueryValue(p.Schema.Value, vs); problem != "" {
						report("%s: %s sends query %s=%v: %s", op.OperationID, name, q, vs, problem)
					}
				}
				keyed := params.GetByInAndName(openapi3.ParameterInHeader, "Idempotency-Key") != nil
				switch key := s.header.Get("Idempotency-Key"); {
				case keyed && key == "":
					report("%s: %s sends no Idempotency-Key", op.OperationID, name)
				case !keyed && key != "":
					report("%s: %s sends an Idempotency-Key the operation does not take", op.OperationID, name)
				}
				for prop := range s.body {
					body[prop] = true
				}
				if s.body != nil && s.header.Get("Content-Type") != "application/json" {
					report("%s: %s sends its body as %q", op.OperationID, name, s.header.Get("Content-Type"))
				}
			}
			for _, p := range params {
				switch p := p.Value; {
				case p.In == openapi3.ParameterInQuery && !query[p.Name]:
					report("%s query %s: no method of the client sends it", op.OperationID, p.Name)
				case p.In == openapi3.ParameterInHeader && p.Name != "Idempotency-Key" && p.Name != "Accept":
					if _, ok := sdkHeadersNotSent[op.OperationID+" "+p.Name]; !ok {
						report("%s header %s: the client does not send it, and sdkHeadersNotSent does not say why", op.OperationID, p.Name)
					}
				}
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil {
					props := sdkProperties(mt.Schema.Value)
					for prop := range props {
						if !body[prop] {
							report("%s body %s: no method of the client sends it", op.OperationID, prop)
						}
					}
					for prop := range body {
						if props[prop] == nil {
							report("%s body %s: sent, but the document does not have it", op.OperationID, prop)
						}
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// sdkQueryValue says what is wrong with the values vs of a query
// parameter of schema s: "" when nothing.
func sdkQueryValue(s *openapi3.Schema, vs []string) string {
	if len(vs) != 1 {
		return "sent more than once"
	}
	v := vs[0]
	switch {
	case s.Type.Is("integer"):
		if _, err := strconv.Atoi(v); err != nil {
			return "not an integer"
		}
	case s.Format == "date-time":
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			return "not an RFC 3339 time"
		}
	}
	return ""
}
