package http_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/adminclient"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
)

// flowCall is one request the fake flow-runner received.
type flowCall struct {
	endpoint  string
	method    string
	path      string
	query     string
	workspace string
	body      []byte
}

// fakeFlowRunner answers the flow-runner's flow, run and knowledge-base
// routes the console calls, in the flow-runner's JSON, from its own
// state, over real NATS.
type fakeFlowRunner struct {
	mu     sync.Mutex
	flows  map[string][]adminclient.Flow // by workspace
	docs   map[string][]adminclient.KnowledgeDocument
	traces map[string]adminclient.Trace // by workspace + " " + run id
	calls  []flowCall
	// refuse answers "METHOD route" (echo's route path) with an error.
	refuse map[string]*errs.Error
}

// serveFlowRunner starts the fake flow-runner on the test's NATS.
func serveFlowRunner(t *testing.T, env *testenv.Env) *fakeFlowRunner {
	t.Helper()
	f := &fakeFlowRunner{flows: map[string][]adminclient.Flow{}, docs: map[string][]adminclient.KnowledgeDocument{},
		traces: map[string]adminclient.Trace{}, refuse: map[string]*errs.Error{}}
	srv, err := rpc.NewServer(env.NATS(t), env.RPCPrefix, rpc.ServiceFlowRunner, "0.0.1", env.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	for endpoint, routes := range map[string]func(*echo.Echo){rpc.EndpointAPI: f.apiRoutes, rpc.EndpointAdmin: f.adminRoutes} {
		e := httpx.NewEcho(env.Logger(t))
		e.Use(f.record(endpoint))
		routes(e)
		if err := srv.Handle(endpoint, e); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fakeFlowRunner) record(endpoint string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			f.mu.Lock()
			f.calls = append(f.calls, flowCall{endpoint: endpoint, method: r.Method, path: r.URL.Path, query: r.URL.RawQuery,
				workspace: rpc.WorkspaceID(r.Context()), body: body})
			refusal := f.refuse[r.Method+" "+c.Path()]
			f.mu.Unlock()
			if refusal != nil {
				return refusal
			}
			return next(c)
		}
	}
}

func (f *fakeFlowRunner) apiRoutes(e *echo.Echo) {
	e.GET("/v1/flows", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !rpc.HasFeature(c.Request().Context(), adminclient.FeatureFlowsAPI) {
			return errs.NotFound(errs.CodeNotFound, "not found")
		}
		out := append([]adminclient.Flow{}, f.flows[rpc.WorkspaceID(c.Request().Context())]...)
		return c.JSON(http.StatusOK, map[string]any{"flows": out})
	})
	e.GET("/v1/flows/:id/runs/:runId", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		t, ok := f.traces[rpc.WorkspaceID(c.Request().Context())+" "+c.Param("runId")]
		if !ok || t.Run.FlowID != c.Param("id") {
			return errs.NotFound("run_not_found", "run not found")
		}
		return c.JSON(http.StatusOK, t)
	})
}

func (f *fakeFlowRunner) adminRoutes(e *echo.Echo) {
	e.POST("/admin/workspaces/:ws/flows", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		ws, flows := c.Param("ws"), f.flows[c.Param("ws")]
		if id := c.QueryParam("flow_id"); id != "" {
			for i := range flows {
				if flows[i].ID == id {
					flows[i].PublishedVersion++
					return c.JSON(http.StatusCreated, map[string]any{"id": id, "published_version": flows[i].PublishedVersion})
				}
			}
			return errs.NotFound("flow_not_found", "flow not found")
		}
		fl := adminclient.Flow{ID: uuid.NewString(), Name: "Published", Status: "active", PublishedVersion: 1, UpdatedAt: "2026-11-24T04:30:00Z"}
		f.flows[ws] = append(flows, fl)
		return c.JSON(http.StatusCreated, map[string]any{"id": fl.ID, "published_version": 1})
	})
	e.POST("/admin/flows/:id/deactivate", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for ws, flows := range f.flows {
			for i, fl := range flows {
				if fl.ID == c.Param("id") {
					f.flows[ws] = append(flows[:i:i], flows[i+1:]...)
					return c.JSON(http.StatusOK, map[string]any{"id": fl.ID, "status": "inactive"})
				}
			}
		}
		return errs.NotFound("flow_not_found", "flow not found")
	})
	e.GET("/admin/workspaces/:ws/kb/documents", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		return c.JSON(http.StatusOK, map[string]any{"documents": append([]adminclient.KnowledgeDocument{}, f.docs[c.Param("ws")]...)})
	})
	e.POST("/admin/workspaces/:ws/kb/documents", func(c echo.Context) error {
		var in struct{ Title, Markdown string }
		if err := httpx.DecodeJSON(c.Request().Body, &in); err != nil {
			return err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		d := adminclient.KnowledgeDocument{ID: uuid.NewString(), Title: in.Title, Passages: 1 + len(in.Markdown)/100, CreatedAt: "2026-11-24T04:30:00Z"}
		f.docs[c.Param("ws")] = append(f.docs[c.Param("ws")], d)
		return c.JSON(http.StatusCreated, map[string]any{"document": d})
	})
	e.DELETE("/admin/kb/documents/:id", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for ws, docs := range f.docs {
			if q := c.QueryParam("workspace"); q != "" && q != ws {
				continue
			}
			for i, d := range docs {
				if d.ID == c.Param("id") {
					f.docs[ws] = append(docs[:i:i], docs[i+1:]...)
					return c.JSON(http.StatusOK, map[string]any{"id": d.ID, "deleted": true})
				}
			}
		}
		return errs.NotFound("document_not_found", "knowledge document not found")
	})
}

// addFlow gives a workspace an active flow and returns its id.
func (f *fakeFlowRunner) addFlow(workspaceID, name string, version int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := uuid.NewString()
	f.flows[workspaceID] = append(f.flows[workspaceID], adminclient.Flow{ID: id, Name: name, Description: name + " flow",
		Status: "active", PublishedVersion: version, UpdatedAt: "2026-11-24T04:0" + strconv.Itoa(version%10) + ":00Z"})
	return id
}

// addDocument gives a workspace a knowledge-base document and returns its
// id.
func (f *fakeFlowRunner) addDocument(workspaceID, title string, passages int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := uuid.NewString()
	f.docs[workspaceID] = append(f.docs[workspaceID], adminclient.KnowledgeDocument{ID: id, Title: title, Passages: passages, CreatedAt: "2026-11-24T04:00:00Z"})
	return id
}

// received returns the calls so far.
func (f *fakeFlowRunner) received() []flowCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]flowCall(nil), f.calls...)
}

// receivedAny reports whether a call with method and path arrived.
func (f *fakeFlowRunner) receivedAny(method, path string) bool {
	for _, c := range f.received() {
		if c.method == method && c.path == path {
			return true
		}
	}
	return false
}

// lastCall is the last call with method and path; the test fails when
// none arrived.
func (f *fakeFlowRunner) lastCall(t *testing.T, method, path string) flowCall {
	t.Helper()
	calls := f.received()
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].method == method && calls[i].path == path {
			return calls[i]
		}
	}
	t.Fatalf("no %s %s reached the flow-runner; it received %+v", method, path, calls)
	return flowCall{}
}

// upload is a file chosen in a form's file field.
type upload struct {
	field, name string
	content     []byte
}

// postMultipart posts fields (and a file, when given) as a browser sends a
// form of enctype multipart/form-data, with the console's Origin.
func (b *browser) postMultipart(path string, fields map[string]string, file *upload) response {
	b.t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for k, v := range fields {
		if err := w.WriteField(k, v); err != nil {
			b.t.Fatal(err)
		}
	}
	if file != nil {
		fw, err := w.CreateFormFile(file.field, file.name)
		if err != nil {
			b.t.Fatal(err)
		}
		_, _ = fw.Write(file.content)
	}
	if err := w.Close(); err != nil {
		b.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, b.h.url+path, &body)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("Origin", b.h.url)
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}
