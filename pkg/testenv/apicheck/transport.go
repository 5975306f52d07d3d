package apicheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Mismatch is one disagreement between the API and the document.
type Mismatch struct {
	Method string
	Path   string
	// Status is the response's, 0 for a request mismatch found before any
	// response.
	Status int
	Reason string
}

func (m Mismatch) String() string {
	return fmt.Sprintf("openapi: %s %s → %d: %s", m.Method, m.Path, m.Status, m.Reason)
}

// Checker validates one test's traffic against the document and fails the
// test on each mismatch.
type Checker struct {
	t   testing.TB
	doc *Document

	// exchanges counts the requests validated with their responses.
	exchanges atomic.Int64

	mu         sync.Mutex
	mismatches []Mismatch
	// webhooks counts the deliveries seen by event (CheckWebhook).
	webhooks map[string]int
	// ended is set when the test has finished: a request still on its way
	// from a goroutine the test left behind is validated but no longer
	// reported, since a finished test cannot fail.
	ended bool
}

// New returns a checker over the embedded document that fails t.
func New(t testing.TB) *Checker {
	t.Helper()
	doc, err := Load()
	if err != nil {
		t.Fatalf("apicheck: %v", err)
	}
	return NewWith(t, doc)
}

// NewWith is New over doc.
func NewWith(t testing.TB, doc *Document) *Checker {
	c := &Checker{t: t, doc: doc}
	t.Cleanup(func() {
		c.mu.Lock()
		c.ended = true
		c.mu.Unlock()
	})
	return c
}

// Exchanges is how many requests have been validated with their
// responses: a test can tell it checked something.
func (c *Checker) Exchanges() int { return int(c.exchanges.Load()) }

// Mismatches returns the mismatches found so far.
func (c *Checker) Mismatches() []Mismatch {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Mismatch(nil), c.mismatches...)
}

func (c *Checker) report(m Mismatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mismatches = append(c.mismatches, m)
	if !c.ended {
		c.t.Errorf("%s", m)
	}
}

// Transport returns base (http.DefaultTransport when nil) validating every
// public API request and response against the document.
func (c *Checker) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{check: c, base: base}
}

// Client is an http.Client over Transport(nil).
func (c *Checker) Client() *http.Client { return &http.Client{Transport: c.Transport(nil)} }

type transport struct {
	check *Checker
	base  http.RoundTripper
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	rest, legacyBase, ok := apiPath(req.URL.Path)
	if !ok {
		return tr.base.RoundTrip(req)
	}
	// The request goes out as the caller made it; validation reads a copy
	// of its body.
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("apicheck: reading the request body: %w", err)
		}
		sent := req.Clone(req.Context())
		sent.Body = io.NopCloser(bytes.NewReader(body))
		sent.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req = sent
	}
	base := BasePath
	if legacyBase {
		base = LegacyBasePath
	}
	ex := tr.check.exchange(req, base, rest, body)

	resp, err := tr.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	tr.check.validateResponse(ex, resp, legacyBase)
	return resp, nil
}

// exchange is one request on its way, matched to its operation.
type exchange struct {
	method, path string
	input        *openapi3filter.RequestValidationInput // nil: no documented operation
	routeErr     error
	requestErr   error
}

// exchange matches req (whose path is base then rest) to its operation and
// validates it; the verdict waits for the response.
func (c *Checker) exchange(req *http.Request, base, rest string, body []byte) *exchange {
	ex := &exchange{method: req.Method, path: req.URL.Path}
	probe := req.Clone(context.Background())
	probe.URL.Path, probe.URL.RawPath = rest, ""
	if probe.Method == http.MethodHead {
		// HEAD answers as GET does, without a body.
		probe.Method = http.MethodGet
	}
	probe.Body = io.NopCloser(bytes.NewReader(body))
	probe.ContentLength = int64(len(body))
	route, params, err := c.doc.find(probe)
	if err == nil && !servedUnder(route, base) {
		err = fmt.Errorf("the document serves %s %s under %v only", route.Method, route.Path, serverURLs(route))
	}
	if err != nil {
		ex.routeErr = err
		return ex
	}
	ex.input = &openapi3filter.RequestValidationInput{
		Request:    probe,
		PathParams: params,
		Route:      route,
		Options: &openapi3filter.Options{
			MultiError:          true,
			SkipSettingDefaults: true,
			AuthenticationFunc:  bearerPresent,
		},
	}
	ex.requestErr = openapi3filter.ValidateRequest(context.Background(), ex.input)
	return ex
}

// servedUnder says whether the operation of route is served under base:
// under every server of the document unless its path or operation names
// its own servers (GET /openapi.json is under /v1 only).
func servedUnder(route *routers.Route, base string) bool {
	urls := serverURLs(route)
	return urls == nil || slices.Contains(urls, base)
}

// serverURLs are the operation's own servers, or its path's; nil when it
// has none and the document's apply.
func serverURLs(route *routers.Route) []string {
	servers := route.PathItem.Servers
	if route.Operation.Servers != nil && len(*route.Operation.Servers) > 0 {
		servers = *route.Operation.Servers
	}
	if len(servers) == 0 {
		return nil
	}
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = strings.TrimSuffix(s.URL, "/")
	}
	return urls
}

// bearerPresent satisfies a bearer scheme with any "Bearer <token>": which
// keys are good is the gateway's business, not the document's.
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	if s == nil || s.Type != "http" || !strings.EqualFold(s.Scheme, "bearer") {
		return nil
	}
	scheme, token, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return errors.New(`no "Authorization: Bearer <key>" header`)
	}
	return nil
}

// validateResponse judges the exchange once resp has come, and leaves resp
// readable by the caller.
func (c *Checker) validateResponse(ex *exchange, resp *http.Response, legacyBase bool) {
	c.exchanges.Add(1)
	fail := func(format string, args ...any) {
		c.report(Mismatch{Method: ex.method, Path: ex.path, Status: resp.StatusCode, Reason: fmt.Sprintf(format, args...)})
	}
	success := resp.StatusCode >= 200 && resp.StatusCode < 300
	if legacyBase && resp.Header.Get("Deprecation") == "" {
		fail("an answer under %s has no Deprecation header", LegacyBasePath)
	}
	if ex.input == nil {
		c.validateUnrouted(ex, resp, fail)
		return
	}
	if ex.requestErr != nil && success {
		fail("request does not match the document, yet was accepted: %v", ex.requestErr)
	}
	if isEventStream(resp.Header) {
		c.validateStreamHead(ex, resp, fail)
		return
	}
	body, readErr := readBack(resp)
	if readErr != nil {
		return // the caller sees the read error; there is no whole body to judge
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: ex.input,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options: &openapi3filter.Options{
			MultiError:            true,
			IncludeResponseStatus: true,
			ExcludeResponseBody:   ex.method == http.MethodHead,
		},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		fail("%v", err)
	}
}

// validateUnrouted judges the answer to a path or method the document does
// not have: only an error in the documented shape may come back.
func (c *Checker) validateUnrouted(ex *exchange, resp *http.Response, fail func(string, ...any)) {
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		fail("served, but the document has no such operation (%v)", ex.routeErr)
		return
	case resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed:
		// 401, 429, 503 come before routing and are documented on every
		// operation; a path of none has nothing to compare them with.
		return
	}
	body, err := readBack(resp)
	if err != nil || ex.method == http.MethodHead {
		return
	}
	if reason := c.errorBodyMismatch(resp.Header, body); reason != "" {
		fail("no such operation in the document (%v), and the error is not the documented error body: %s", ex.routeErr, reason)
	}
}

// ErrorSchema is the component schema of every error body.
const ErrorSchema = "Error"

// errorBodyMismatch is why body is not the document's error body, "" if it
// is.
func (c *Checker) errorBodyMismatch(h http.Header, body []byte) string {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if mt != "application/json" {
		return fmt.Sprintf("content type %q, want application/json", h.Get("Content-Type"))
	}
	schema := c.doc.schema(ErrorSchema)
	if schema == nil || schema.Value == nil {
		return fmt.Sprintf("the document has no %s schema", ErrorSchema)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Sprintf("body is not JSON: %v", err)
	}
	if err := schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse()); err != nil {
		return err.Error()
	}
	return ""
}

// validateStreamHead checks a text/event-stream answer's status, headers
// and content type without reading the stream: the caller reads it as it
// comes.
func (c *Checker) validateStreamHead(ex *exchange, resp *http.Response, fail func(string, ...any)) {
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: ex.input,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   http.NoBody,
		Options:                &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true, ExcludeResponseBody: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		fail("%v", err)
		return
	}
	documented := documentedResponse(ex.input.Route, resp.StatusCode)
	if documented == nil || documented.Content.Get(resp.Header.Get("Content-Type")) == nil {
		fail("response content type %q is not documented for %d", resp.Header.Get("Content-Type"), resp.StatusCode)
	}
}

func documentedResponse(route *routers.Route, status int) *openapi3.Response {
	ref := route.Operation.Responses.Status(status)
	if ref == nil {
		ref = route.Operation.Responses.Default()
	}
	if ref == nil {
		return nil
	}
	return ref.Value
}

func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// readBack reads resp's whole body and puts it back for the caller. A read
// that fails is put back as read so far, followed by its error.
func readBack(resp *http.Response) ([]byte, error) {
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = &replayBody{Reader: bytes.NewReader(body), err: err}
	return body, err
}

type replayBody struct {
	*bytes.Reader
	err error
}

func (b *replayBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if errors.Is(err, io.EOF) && b.err != nil {
		return n, b.err
	}
	return n, err
}

func (b *replayBody) Close() error { return nil }

// CloseIdleConnections lets http.Client.CloseIdleConnections reach base.
func (tr *transport) CloseIdleConnections() {
	if ci, ok := tr.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}
