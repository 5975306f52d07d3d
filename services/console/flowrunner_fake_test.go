package main

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

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
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
	mu       sync.Mutex
	flows    map[string][]flowrunnerapi.WorkspaceFlow // by workspace
	versions map[string][]fakeVersion                 // by flow id, oldest first
	runs     map[string][]flowrunnerapi.RunSummary    // by workspace, newest first
	docs     map[string][]flowrunnerapi.KnowledgeDocument
	traces   map[string]flowrunnerapi.Trace // by workspace + " " + run id
	calls    []flowCall
	// refuse answers "METHOD route" (echo's route path) with an error.
	refuse map[string]*errs.Error
}

// fakeVersion is a published version: its document and when.
type fakeVersion struct {
	document    string
	publishedAt string
}

// serveFlowRunner starts the fake flow-runner on the test's NATS.
func serveFlowRunner(t *testing.T, env *testenv.Env) *fakeFlowRunner {
	t.Helper()
	f := &fakeFlowRunner{flows: map[string][]flowrunnerapi.WorkspaceFlow{}, versions: map[string][]fakeVersion{},
		runs: map[string][]flowrunnerapi.RunSummary{}, docs: map[string][]flowrunnerapi.KnowledgeDocument{},
		traces: map[string]flowrunnerapi.Trace{}, refuse: map[string]*errs.Error{}}
	endpoints := map[string]http.Handler{}
	for endpoint, routes := range map[string]func(*echo.Echo){rpc.EndpointAPI: f.apiRoutes, rpc.EndpointAdmin: f.adminRoutes} {
		e := httpx.NewEcho(env.Logger(t))
		e.Use(recorder(f.noter(endpoint)))
		routes(e)
		endpoints[endpoint] = e
	}
	serveFake(t, env, rpc.ServiceFlowRunner, endpoints)
	return f
}

// noter keeps each request to endpoint and returns the refusal set for
// its route.
func (f *fakeFlowRunner) noter(endpoint string) func(echo.Context, []byte) *errs.Error {
	return func(c echo.Context, body []byte) *errs.Error {
		r := c.Request()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls = append(f.calls, flowCall{endpoint: endpoint, method: r.Method, path: r.URL.Path, query: r.URL.RawQuery,
			workspace: rpc.WorkspaceID(r.Context()), body: body})
		return f.refuse[r.Method+" "+c.Path()]
	}
}

func (f *fakeFlowRunner) apiRoutes(e *echo.Echo) {
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
		body, _ := io.ReadAll(c.Request().Body)
		ws, flows := c.Param("ws"), f.flows[c.Param("ws")]
		const now = "2026-11-24T04:30:00Z"
		if id := c.QueryParam("flow_id"); id != "" {
			for i := range flows {
				if flows[i].ID == id {
					flows[i].PublishedVersion++
					flows[i].Status, flows[i].UpdatedAt = "active", now
					f.versions[id] = append(f.versions[id], fakeVersion{document: string(body), publishedAt: now})
					return c.JSON(http.StatusCreated, flowrunnerapi.PublishedFlow{ID: id, PublishedVersion: flows[i].PublishedVersion})
				}
			}
			return errs.NotFound("flow_not_found", "flow not found")
		}
		fl := flowrunnerapi.WorkspaceFlow{Flow: flowrunnerapi.Flow{ID: uuid.NewString(), Name: "Published", Status: "active", PublishedVersion: 1, UpdatedAt: now},
			Triggers: []string{"api"}, CreatedAt: now}
		f.flows[ws] = append(flows, fl)
		f.versions[fl.ID] = []fakeVersion{{document: string(body), publishedAt: now}}
		return c.JSON(http.StatusCreated, flowrunnerapi.PublishedFlow{ID: fl.ID, PublishedVersion: 1})
	})
	e.GET("/admin/workspaces/:ws/flows", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		return c.JSON(http.StatusOK, flowrunnerapi.WorkspaceFlowsResponse{Flows: append([]flowrunnerapi.WorkspaceFlow{}, f.flows[c.Param("ws")]...)})
	})
	e.POST("/admin/flows/:id/deactivate", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		// The flow-runner takes a call without workspace_id (parleyctl's),
		// but the console must always name its workspace; with it, only
		// that workspace's flows are found.
		want := c.QueryParam("workspace_id")
		if want == "" {
			return errs.InvalidRequest("the console deactivated a flow without its workspace_id")
		}
		for ws, flows := range f.flows {
			if ws != want {
				continue
			}
			for i := range flows {
				if flows[i].ID == c.Param("id") {
					flows[i].Status = "inactive"
					return c.JSON(http.StatusOK, flowrunnerapi.DeactivatedFlow{ID: flows[i].ID, Status: "inactive"})
				}
			}
		}
		return errs.NotFound("flow_not_found", "flow not found")
	})
	e.GET("/admin/flows/:id/versions", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		fl, ok := f.flowOf(c.QueryParam("workspace_id"), c.Param("id"))
		if !ok {
			return errs.NotFound("flow_not_found", "flow not found")
		}
		out := flowrunnerapi.FlowVersions{FlowID: fl.ID, PublishedVersion: fl.PublishedVersion, Versions: []flowrunnerapi.FlowVersion{}}
		versions := f.versions[fl.ID]
		for i := len(versions) - 1; i >= 0; i-- {
			out.Versions = append(out.Versions, flowrunnerapi.FlowVersion{Version: i + 1, PublishedAt: versions[i].publishedAt, NodeCount: i + 2})
		}
		return c.JSON(http.StatusOK, out)
	})
	e.GET("/admin/flows/:id/versions/:version", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		fl, ok := f.flowOf(c.QueryParam("workspace_id"), c.Param("id"))
		if !ok {
			return errs.NotFound("flow_not_found", "flow not found")
		}
		n, err := strconv.Atoi(c.Param("version"))
		if err != nil || n < 1 {
			return errs.InvalidRequest("version must be a version number (1, 2, ...)")
		}
		if versions := f.versions[fl.ID]; n <= len(versions) {
			return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, []byte(versions[n-1].document))
		}
		return errs.NotFound("flow_version_not_found", "flow version not found")
	})
	e.GET("/admin/workspaces/:ws/runs", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		ws, q := c.Param("ws"), c.QueryParams()
		if id := q.Get("flow_id"); id != "" {
			if _, ok := f.flowOf(ws, id); !ok {
				return errs.NotFound("flow_not_found", "flow not found")
			}
		}
		if s := q.Get("status"); s != "" && s != "waiting" && s != "completed" && s != "failed" {
			return errs.InvalidRequest("status must be one of waiting, completed, failed")
		}
		limit := 50
		if l := q.Get("limit"); l != "" {
			limit, _ = strconv.Atoi(l)
		}
		out := flowrunnerapi.RunPage{Runs: []flowrunnerapi.RunSummary{}}
		for _, r := range f.runs[ws] {
			if (q.Get("flow_id") != "" && r.FlowID != q.Get("flow_id")) || (q.Get("status") != "" && r.Status != q.Get("status")) ||
				(q.Get("before") != "" && r.StartedAt >= q.Get("before")) {
				continue
			}
			if len(out.Runs) == limit {
				next := out.Runs[limit-1].StartedAt
				out.NextBefore = &next
				break
			}
			out.Runs = append(out.Runs, r)
		}
		return c.JSON(http.StatusOK, out)
	})
	e.GET("/admin/workspaces/:ws/runs/:runId", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		t, ok := f.traces[c.Param("ws")+" "+c.Param("runId")]
		if !ok {
			return errs.NotFound("run_not_found", "run not found")
		}
		return c.JSON(http.StatusOK, t)
	})
	e.GET("/admin/workspaces/:ws/kb/documents", func(c echo.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		return c.JSON(http.StatusOK, flowrunnerapi.KnowledgeDocumentsResponse{Documents: append([]flowrunnerapi.KnowledgeDocument{}, f.docs[c.Param("ws")]...)})
	})
	e.POST("/admin/workspaces/:ws/kb/documents", func(c echo.Context) error {
		var in flowrunnerapi.AddKnowledgeDocumentRequest
		if err := httpx.DecodeJSON(c.Request().Body, &in); err != nil {
			return err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		d := flowrunnerapi.KnowledgeDocument{ID: uuid.NewString(), Title: in.Title, Passages: 1 + len(in.Markdown)/100, CreatedAt: "2026-11-24T04:30:00Z"}
		f.docs[c.Param("ws")] = append(f.docs[c.Param("ws")], d)
		return c.JSON(http.StatusCreated, flowrunnerapi.KnowledgeDocumentResponse{Document: d})
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
					return c.JSON(http.StatusOK, flowrunnerapi.DeletedDocument{ID: d.ID, Deleted: true})
				}
			}
		}
		return errs.NotFound("document_not_found", "knowledge document not found")
	})
}

// flowOf is the workspace's flow with id; the caller holds mu.
func (f *fakeFlowRunner) flowOf(workspaceID, id string) (flowrunnerapi.WorkspaceFlow, bool) {
	for _, fl := range f.flows[workspaceID] {
		if fl.ID == id {
			return fl, true
		}
	}
	return flowrunnerapi.WorkspaceFlow{}, false
}

// addFlow gives a workspace an active API flow with versions 1 to version
// and returns its id. Version n's document is versionDocument(name, n).
func (f *fakeFlowRunner) addFlow(workspaceID, name string, version int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := uuid.NewString()
	f.flows[workspaceID] = append(f.flows[workspaceID], flowrunnerapi.WorkspaceFlow{
		Flow: flowrunnerapi.Flow{ID: id, Name: name, Description: name + " flow", Status: "active", PublishedVersion: version,
			UpdatedAt: "2026-11-24T04:0" + strconv.Itoa(version%10) + ":00Z"},
		Triggers: []string{"api"}, CreatedAt: "2026-11-24T04:00:00Z"})
	for n := 1; n <= version; n++ {
		f.versions[id] = append(f.versions[id], fakeVersion{document: versionDocument(name, n), publishedAt: "2026-11-24T04:0" + strconv.Itoa(n%10) + ":00Z"})
	}
	return id
}

// versionDocument is the document of version n of a flow addFlow made.
func versionDocument(name string, n int) string {
	return "{\n  \"name\": \"" + name + "\",\n  \"description\": \"version " + strconv.Itoa(n) + "\",\n  \"nodes\": []\n}"
}

// addRuns gives a workspace runs, newest first after the ones it has.
func (f *fakeFlowRunner) addRuns(workspaceID string, runs ...flowrunnerapi.RunSummary) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[workspaceID] = append(f.runs[workspaceID], runs...)
}

// addDocument gives a workspace a knowledge-base document and returns its
// id.
func (f *fakeFlowRunner) addDocument(workspaceID, title string, passages int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := uuid.NewString()
	f.docs[workspaceID] = append(f.docs[workspaceID], flowrunnerapi.KnowledgeDocument{ID: id, Title: title, Passages: passages, CreatedAt: "2026-11-24T04:00:00Z"})
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
	return b.send(req)
}
