package apicheck

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/api"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
)

// testDocument is a small API in the shape of Parley's: bearer auth, one
// error schema, a JSON read, a JSON write, a stream and one webhook.
const testDocument = `
openapi: 3.1.0
info: {title: test, version: "1"}
servers: [{url: /v1}, {url: /api/v1}]
security: [{apiKey: []}]
paths:
  /things/{id}:
    get:
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        "200":
          description: A thing.
          content:
            application/json:
              schema:
                type: object
                required: [id, size]
                properties:
                  id: {type: string}
                  size: {type: integer}
        "401": {$ref: "#/components/responses/Error"}
        "404": {$ref: "#/components/responses/Error"}
  /things:
    post:
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [size]
              properties:
                size: {type: integer, minimum: 1}
      responses:
        "201":
          description: Made.
          content:
            application/json:
              schema: {type: object, required: [id], properties: {id: {type: string}}}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Error"}
  /stream:
    post:
      responses:
        "200":
          description: Events.
          content:
            text/event-stream:
              schema: {type: string}
  /open:
    servers: [{url: /v1}]
    get:
      security: []
      responses:
        "200":
          description: No key needed.
          content:
            application/json:
              schema: {type: object}
components:
  securitySchemes:
    apiKey: {type: http, scheme: bearer}
  responses:
    Error:
      description: An error.
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
  schemas:
    Error:
      type: object
      required: [code, message]
      properties:
        code: {type: string}
        message: {type: string}
webhooks:
  thing.made:
    post:
      parameters:
        - {name: X-Service-Event, in: header, required: true, schema: {type: string, const: thing.made}}
        - {name: X-Service-Signature, in: header, required: true, schema: {type: string, pattern: "^t=\\d+,v1=[0-9a-f]{64}$"}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [event, data]
              properties:
                event: {const: thing.made}
                data: {type: object, required: [id], properties: {id: {type: string}}}
      responses:
        "2XX": {description: Taken.}
`

func testDoc(t *testing.T) *Document {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData([]byte(testDocument))
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDocument(doc)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// recorder stands in for the test a Checker fails: it keeps the failures.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

// newChecked starts a server answering with handle and returns a client
// checked against testDocument, with the recorder its failures go to.
func newChecked(t *testing.T, handle http.HandlerFunc) (*recorder, *http.Client, string) {
	t.Helper()
	srv := httptest.NewServer(handle)
	t.Cleanup(srv.Close)
	rec := &recorder{TB: t}
	return rec, NewWith(rec, testDoc(t)).Client(), srv.URL
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func do(t *testing.T, client *http.Client, method, url, key, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(raw)
}

// wantFailures checks that rec has failed once for each of want, in order;
// a want of parts joined by … needs each part.
func wantFailures(t *testing.T, rec *recorder, want ...string) {
	t.Helper()
	got := rec.failures()
	if len(got) != len(want) {
		t.Fatalf("got %d failures %q, want %d with %q", len(got), got, len(want), want)
	}
	for i, w := range want {
		for _, part := range strings.Split(w, "…") {
			if !strings.Contains(got[i], part) {
				t.Errorf("failure %d = %q, want it to contain %q", i, got[i], part)
			}
		}
	}
}

func TestDocumentedAnswerPassesAndBodiesArriveIntact(t *testing.T) {
	var gotBody string
	rec, client, base := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		writeJSON(w, http.StatusCreated, `{"id": "t1"}`)
	})
	resp, body := do(t, client, http.MethodPost, base+"/v1/things", "k", `{"size": 3}`)
	if resp.StatusCode != http.StatusCreated || body != `{"id": "t1"}` || gotBody != `{"size": 3}` {
		t.Fatalf("%d %q, server got %q", resp.StatusCode, body, gotBody)
	}
	wantFailures(t, rec)
}

func TestResponseBodyNotMatchingFails(t *testing.T) {
	rec, client, base := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"id": "t1", "size": "big"}`)
	})
	_, body := do(t, client, http.MethodGet, base+"/v1/things/t1", "k", "")
	if body != `{"id": "t1", "size": "big"}` {
		t.Fatalf("body %q", body)
	}
	wantFailures(t, rec, "GET /v1/things/t1 → 200…size")
}

func TestUndocumentedStatusFails(t *testing.T) {
	rec, client, base := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusTeapot, `{"code": "teapot", "message": "no"}`)
	})
	do(t, client, http.MethodGet, base+"/v1/things/t1", "k", "")
	wantFailures(t, rec, "→ 418…status is not supported")
}

func TestErrorNotInTheDocumentedShapeFails(t *testing.T) {
	rec, client, base := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, `{"error": "gone"}`)
	})
	do(t, client, http.MethodGet, base+"/v1/things/t1", "k", "")
	wantFailures(t, rec, "→ 404")
}

// An invalid request answered with a documented error is a test of that
// error: it passes. The same request accepted is a mismatch.
func TestInvalidRequestIsReportedOnlyWhenAccepted(t *testing.T) {
	var accept atomic.Bool
	rec, client, base := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		if !accept.Load() {
			writeJSON(w, http.StatusBadRequest, `{"code": "invalid_request", "message": "size must be at least 1"}`)
			return
		}
		writeJSON(w, http.StatusCreated, `{"id": "t1"}`)
	})
	do(t, client, http.MethodPost, base+"/v1/things", "k", `{"size": 0}`)
	wantFailures(t, rec)
	accept.Store(true)
	do(t, client, http.MethodPost, base+"/v1/things", "k", `{"size": 0}`)
	wantFailures(t, rec, "POST /v1/things → 201: request does not match the document, yet was accepted")
}

func TestAuthenticationIsCheckedForPresenceOnly(t *testing.T) {
	rec, client, base := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/open" {
			writeJSON(w, http.StatusOK, `{}`)
			return
		}
		if r.Header.Get("Authorization") != "Bearer good" {
			writeJSON(w, http.StatusUnauthorized, `{"code": "unauthorized", "message": "no key"}`)
			return
		}
		writeJSON(w, http.StatusOK, `{"id": "t1", "size": 1}`)
	})
	do(t, client, http.MethodGet, base+"/v1/things/t1", "", "")    // 401 without a key: a test of the 401
	do(t, client, http.MethodGet, base+"/v1/things/t1", "bad", "") // any token is a bearer token
	do(t, client, http.MethodGet, base+"/v1/things/t1", "good", "")
	do(t, client, http.MethodGet, base+"/v1/open", "", "") // security: [] needs none
	wantFailures(t, rec)
	// A server letting a request without a key through is a mismatch.
	rec2, client2, base2 := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"id": "t1", "size": 1}`)
	})
	do(t, client2, http.MethodGet, base2+"/v1/things/t1", "", "")
	wantFailures(t, rec2, "yet was accepted…Authorization")
}

// The stream's head is checked as soon as it comes; its events are left
// to the caller, who reads them while the server is still writing.
func TestEventStreamHeadIsCheckedWithoutReadingTheStream(t *testing.T) {
	release := make(chan struct{})
	rec, client, base := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "event: first\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		_, _ = io.WriteString(w, "event: last\ndata: {}\n\n")
	})
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/stream", nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := client.Do(req) // returns while the server holds the stream open
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, len("event: first\ndata: {}\n\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "event: first\ndata: {}\n\n" {
		t.Fatalf("first event %q, %v", first, err)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(rest) != "event: last\ndata: {}\n\n" {
		t.Fatalf("rest of the stream %q", rest)
	}
	wantFailures(t, rec)

	rec2, client2, base2 := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "event: first\ndata: {}\n\n")
	})
	do(t, client2, http.MethodPost, base2+"/v1/stream", "k", "")
	wantFailures(t, rec2, `"text/plain"`)
}

func TestOtherPathsPassUntouched(t *testing.T) {
	rec, client, base := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `not even JSON`)
	})
	for _, p := range []string{"/readyz", "/admin/channels", "/v1x/things", "/ingress/meta"} {
		if _, body := do(t, client, http.MethodGet, base+p, "", ""); body != "not even JSON" {
			t.Fatalf("%s: %q", p, body)
		}
	}
	wantFailures(t, rec)
}

func TestLegacyBaseIsTheSameOperationsAndSaysDeprecated(t *testing.T) {
	var deprecated atomic.Bool
	deprecated.Store(true)
	rec, client, base := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		if deprecated.Load() {
			w.Header().Set("Deprecation", "@1789689600")
		}
		writeJSON(w, http.StatusOK, `{"id": "t1", "size": 1}`)
	})
	do(t, client, http.MethodGet, base+"/api/v1/things/t1", "k", "")
	wantFailures(t, rec)
	deprecated.Store(false)
	do(t, client, http.MethodGet, base+"/api/v1/things/t1", "k", "")
	wantFailures(t, rec, "no Deprecation header")
}

func TestUndocumentedRouteFailsWhenServed(t *testing.T) {
	var served atomic.Bool
	served.Store(true)
	rec, client, base := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		if served.Load() {
			writeJSON(w, http.StatusOK, `{}`)
			return
		}
		writeJSON(w, http.StatusNotFound, `{"code": "not_found", "message": "no such route"}`)
	})
	do(t, client, http.MethodGet, base+"/v1/gadgets", "k", "")
	do(t, client, http.MethodDelete, base+"/v1/things/t1", "k", "")
	wantFailures(t, rec, "GET /v1/gadgets → 200: served, but the document has no such operation",
		"DELETE /v1/things/t1 → 200: served, but the document has no such operation")
	served.Store(false)
	do(t, client, http.MethodGet, base+"/v1/gadgets", "k", "")
	if n := len(rec.failures()); n != 2 {
		t.Fatalf("a documented-shape 404 for an unknown route failed: %q", rec.failures()[2:])
	}
}

// A path with servers of its own is served under those only: /open is
// under /v1, not under the deprecated base.
func TestPathServedUnderItsOwnServersOnly(t *testing.T) {
	var served atomic.Bool
	served.Store(true)
	rec, client, base := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Deprecation", "@1789689600")
		if served.Load() {
			writeJSON(w, http.StatusOK, `{}`)
			return
		}
		writeJSON(w, http.StatusNotFound, `{"code": "not_found", "message": "no such route"}`)
	})
	do(t, client, http.MethodGet, base+"/v1/open", "", "")
	do(t, client, http.MethodGet, base+"/api/v1/open", "", "")
	served.Store(false)
	do(t, client, http.MethodGet, base+"/api/v1/open", "", "")
	wantFailures(t, rec, "GET /api/v1/open → 200: served, but the document has no such operation…under [/v1] only")
}

func TestHeadIsCheckedAsGetWithoutABody(t *testing.T) {
	rec, client, base := newChecked(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
	})
	do(t, client, http.MethodHead, base+"/v1/things/t1", "k", "")
	wantFailures(t, rec)
}

func TestConcurrentRequestsAreValidatedIndependently(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/bad") {
			writeJSON(w, http.StatusOK, `{"id": 1}`)
			return
		}
		writeJSON(w, http.StatusOK, `{"id": "t", "size": 1}`)
	}))
	t.Cleanup(srv.Close)
	rec := &recorder{TB: t}
	c := NewWith(rec, testDoc(t))
	client, base := c.Client(), srv.URL
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			id := "good"
			if i%4 == 0 {
				id = "bad"
			}
			do(t, client, http.MethodGet, base+"/v1/things/"+id, "k", "")
		})
	}
	wg.Wait()
	if n := len(rec.failures()); n != 5 {
		t.Fatalf("%d failures, want 5: %q", n, rec.failures())
	}
	if n := c.Exchanges(); n != 20 {
		t.Fatalf("%d exchanges checked, want 20", n)
	}
}

func TestWebhookDeliveries(t *testing.T) {
	doc := testDoc(t)
	rec := &recorder{TB: t}
	c := NewWith(rec, doc)
	sig := "t=1700000000,v1=" + strings.Repeat("ab", 32)
	delivery := func(event, signature, body string) receiver.Request {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("X-Service-Event", event)
		if signature != "" {
			h.Set("X-Service-Signature", signature)
		}
		return receiver.Request{Method: http.MethodPost, Path: receiver.Path, Header: h, Body: []byte(body)}
	}
	c.CheckWebhook(delivery("thing.made", sig, `{"event": "thing.made", "data": {"id": "t1"}}`))
	wantFailures(t, rec)
	c.CheckWebhook(delivery("thing.made", "", `{"event": "thing.made", "data": {"id": "t1"}}`))
	c.CheckWebhook(delivery("thing.made", sig, `{"event": "thing.made", "data": {}}`))
	c.CheckWebhook(delivery("thing.lost", sig, `{"event": "thing.lost", "data": {"id": "t1"}}`))
	wantFailures(t, rec, "X-Service-Signature", "id", `no webhook in the document for X-Service-Event "thing.lost"`)

	// Three thing.made deliveries have been validated; of WebhookChecksPerEvent
	// more bad ones, those up to the limit fail and the last three pass.
	before := len(rec.failures())
	for range WebhookChecksPerEvent {
		c.CheckWebhook(delivery("thing.made", "", `{}`))
	}
	if got, want := len(rec.failures())-before, WebhookChecksPerEvent-3; got != want {
		t.Fatalf("%d more failures, want %d", got, want)
	}
}

func TestCompareRoutesReportsUndocumentedAndUnserved(t *testing.T) {
	doc := testDoc(t)
	e := echo.New()
	g := e.Group("/v1", func(next echo.HandlerFunc) echo.HandlerFunc { return next }) // adds 404 catch-alls
	nop := func(echo.Context) error { return nil }
	g.GET("/things/:thing", nop)
	g.POST("/things", nop)
	g.GET("/gadgets", nop) // not documented
	e.GET("/readyz", nop)  // not /v1
	served := EchoRoutes(e)
	documented := OfSegments(doc.DocumentedRoutes(), Segments(served))
	d := CompareRoutes(served, documented)
	if fmt.Sprint(d.Undocumented) != "[GET /v1/gadgets]" {
		t.Errorf("undocumented = %v", d.Undocumented)
	}
	// /stream and /open are other segments: another server's.
	if len(d.Unserved) != 0 {
		t.Errorf("unserved = %v", d.Unserved)
	}
	d = CompareRoutes(served, doc.DocumentedRoutes())
	if fmt.Sprint(d.Unserved) != "[GET /v1/open POST /v1/stream]" {
		t.Errorf("unserved over the whole document = %v", d.Unserved)
	}

	rec := &recorder{TB: t}
	CheckRoutes(rec, "test server", served, doc.DocumentedRoutes())
	wantFailures(t, rec,
		"test server serves GET /v1/gadgets, which pkg/openapi/openapi.yaml does not document",
		"documents GET /v1/open, which test server does not serve",
		"documents POST /v1/stream, which test server does not serve")
}

// The embedded document loads and has the error schema the checker
// compares unknown routes' errors with; checked against it, a wrong answer
// fails and a right one passes.
func TestEmbeddedDocument(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.DocumentedRoutes()) == 0 {
		t.Fatal("the document has no operations")
	}
	if s := doc.schema(ErrorSchema); s == nil {
		t.Fatalf("the document has no %s schema", ErrorSchema)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/me":
			writeJSON(w, http.StatusOK, `{"workspace": 1}`)
		case "/v1/channels": // a 401 without its WWW-Authenticate
			writeJSON(w, http.StatusUnauthorized, `{"code": "unauthorized", "message": "unknown or revoked API key"}`)
		default:
			writeJSON(w, http.StatusNotFound, `{"code": "not_found", "message": "no such route"}`)
		}
	}))
	t.Cleanup(srv.Close)
	rec := &recorder{TB: t}
	client := NewWith(rec, doc).Client()
	do(t, client, http.MethodGet, srv.URL+"/v1/me", "k", "")
	do(t, client, http.MethodGet, srv.URL+"/v1/channels", "k", "")
	do(t, client, http.MethodGet, srv.URL+"/v1/nothing-here", "k", "")
	wantFailures(t, rec, "GET /v1/me → 200…RateLimit-Limit", "GET /v1/channels → 401…WWW-Authenticate")
}

// Each watched host's mismatches fail the test that watches it, whichever
// client sent the request; other hosts' requests pass unchecked.
func TestHostsSendEachRequestToItsChecker(t *testing.T) {
	bad := func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, `{"id": 1}`) }
	first, second, unwatched := httptest.NewServer(http.HandlerFunc(bad)), httptest.NewServer(http.HandlerFunc(bad)), httptest.NewServer(http.HandlerFunc(bad))
	t.Cleanup(first.Close)
	t.Cleanup(second.Close)
	t.Cleanup(unwatched.Close)
	doc := testDoc(t)
	var hosts Hosts
	recFirst, recSecond := &recorder{TB: t}, &recorder{TB: t}
	hosts.Watch(t, strings.TrimPrefix(first.URL, "http://"), NewWith(recFirst, doc))
	hosts.Watch(t, strings.TrimPrefix(second.URL, "http://"), NewWith(recSecond, doc))
	client := &http.Client{Transport: hosts.Transport(nil)}
	do(t, client, http.MethodGet, first.URL+"/v1/things/a", "k", "")
	do(t, client, http.MethodGet, second.URL+"/v1/things/b", "k", "")
	do(t, client, http.MethodGet, second.URL+"/v1/things/c", "k", "")
	do(t, client, http.MethodGet, unwatched.URL+"/v1/things/d", "k", "")
	wantFailures(t, recFirst, "/v1/things/a")
	wantFailures(t, recSecond, "/v1/things/b", "/v1/things/c")
}

// A route served and not declared fails, and so does one declared and not
// served; parameter names do not matter, and catch-alls are no routes.
func TestDeclaredRoutesMustBeTheServedOnes(t *testing.T) {
	e := echo.New()
	nop := func(echo.Context) error { return nil }
	e.GET("/admin/things/:id", nop)
	e.POST("/admin/things", nop)
	e.Any("/ingress/*", nop)
	rec := &recorder{TB: t}
	CheckDeclaredRoutes(rec, "things", e, []api.Route{
		{Method: http.MethodGet, Path: "/admin/things/:thing_id"},
		{Method: http.MethodDelete, Path: "/admin/things/:id"},
	})
	wantFailures(t, rec,
		"things serves POST /admin/things, which its pkg/api Routes do not declare",
		"its pkg/api Routes declare DELETE /admin/things/{}, which things does not serve")

	rec = &recorder{TB: t}
	CheckDeclaredRoutes(rec, "things", e, []api.Route{
		{Method: http.MethodGet, Path: "/admin/things/:id"},
		{Method: http.MethodPost, Path: "/admin/things"},
	})
	wantFailures(t, rec)
}

// A body with a field its type does not declare is refused.
func TestDecodeStrictRefusesUndeclaredFields(t *testing.T) {
	type thing struct {
		ID string `json:"id"`
	}
	var v thing
	if err := DecodeStrict([]byte(`{"id":"a"}`), &v); err != nil || v.ID != "a" {
		t.Fatalf("DecodeStrict = %+v, %v", v, err)
	}
	if err := DecodeStrict([]byte(`{"id":"a","size":3}`), &v); err == nil || !strings.Contains(err.Error(), `"size"`) {
		t.Fatalf("DecodeStrict with an undeclared field = %v", err)
	}
	if got := Body[thing](t, []byte(`{"id":"b"}`)); got.ID != "b" {
		t.Fatalf("Body = %+v", got)
	}
}
