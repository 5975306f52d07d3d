package main

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/errs"
)

// flowsSetup is a harness with the fake flow-runner and a workspace
// operator of "Acme" signed in.
type flowsSetup struct {
	h   *harness
	fr  *fakeFlowRunner
	b   *browser
	ws  string
	csr string
}

func newFlowsSetup(t *testing.T) flowsSetup {
	t.Helper()
	h, ws, b := signedInToAcme(t)
	return flowsSetup{h: h, fr: h.flows, b: b, ws: ws, csr: b.pageCSRF("/workspaces/" + ws)}
}

// rawTime is an RFC 3339 time shown as text rather than kept in a
// datetime attribute.
var rawTime = regexp.MustCompile(`>[0-9]{4}-[0-9]{2}-[0-9]{2}T[^<]*<`)

// mustShowMinutes fails when the page shows a time as RFC 3339 rather
// than as "2026-11-24 04:00 UTC".
func mustShowMinutes(t *testing.T, r response) {
	t.Helper()
	if m := rawTime.FindString(r.body); m != "" {
		t.Fatalf("the page shows the raw time %q:\n%s", m, r.body)
	}
}

func TestFlowsListAndPage(t *testing.T) {
	t.Parallel()
	s := newFlowsSetup(t)
	id := s.fr.addFlow(s.ws, "Order status", 3)
	base := "/workspaces/" + s.ws

	list := s.b.get(base + "/flows")
	if list.status != http.StatusOK {
		t.Fatalf("GET flows = %d: %s", list.status, list.body)
	}
	mustContain(t, list, `<a href="`+base+`/flows/`+id+`">Order status</a>`, "Order status flow",
		`status-active">active</span>`, `<td data-label="Triggers">api</td>`, `<td data-label="Published version">3</td>`,
		`<time datetime="2026-11-24T04:03:00Z">2026-11-24 04:03 UTC</time>`, `aria-current="page">Flows</a>`, `enctype="multipart/form-data"`, `<label for="document">`)
	mustShowMinutes(t, list)
	if c := s.fr.lastCall(t, http.MethodGet, "/admin/workspaces/"+s.ws+"/flows"); c.endpoint != "admin" {
		t.Fatalf("the list was read as %+v", c)
	}

	page := s.b.get(base + "/flows/" + id)
	if page.status != http.StatusOK {
		t.Fatalf("GET the flow = %d: %s", page.status, page.body)
	}
	mustContain(t, page, "<h1>Order status</h1>", "<dt>Published version</dt><dd>3</dd>", "<dt>Triggers</dt><dd>api</dd>",
		`action="`+base+`/flows/`+id+`/runs"`, `<label for="run-id">Run id</label>`,
		`action="`+base+`/flows/`+id+`/versions"`, `href="`+base+`/flows/`+id+`/deactivate"`)
	mustShowMinutes(t, page)

	empty := newFlowsSetup(t)
	if r := empty.b.get("/workspaces/" + empty.ws + "/flows"); r.status != http.StatusOK || !strings.Contains(r.body, "No flows yet.") {
		t.Fatalf("an empty list = %d: %s", r.status, r.body)
	}
	if r := s.b.get(base + "/flows/" + "f-unknown"); r.status != http.StatusNotFound || !strings.Contains(r.body, "This workspace has no such flow") {
		t.Fatalf("an unknown flow = %d: %s", r.status, r.body)
	}
}

// TestFlowPageVersionsAndRuns: the flow's page lists its versions with the
// published one's definition shown as published (any other on request),
// the publish box starting from it, and its runs newest first with their
// status, start, duration, tokens and cost, each linked to its trace,
// filtered by status and paged.
func TestFlowPageVersionsAndRuns(t *testing.T) {
	t.Parallel()
	s := newFlowsSetup(t)
	base := "/workspaces/" + s.ws
	id := s.fr.addFlow(s.ws, "Order status", 3)
	other := s.fr.addFlow(s.ws, "Other", 1)
	flowPath := base + "/flows/" + id
	ms := func(n int64) *int64 { return &n }
	done := "2026-11-24T04:10:01.5Z"
	s.fr.addRuns(s.ws,
		flowrunnerapi.RunSummary{ID: "r4", FlowID: id, FlowVersion: 3, Status: "waiting", StartedAt: "2026-11-24T04:11:00Z"},
		flowrunnerapi.RunSummary{ID: "r-other", FlowID: other, FlowVersion: 1, Status: "completed", StartedAt: "2026-11-24T04:10:30Z"},
		flowrunnerapi.RunSummary{ID: "r3", FlowID: id, FlowVersion: 3, Status: "failed", StartedAt: "2026-11-24T04:10:00Z", CompletedAt: &done,
			DurationMS: ms(1500), Usage: flowrunnerapi.Usage{Tokens: 1234, CostUSD: 0.00185, BillableUnits: 1}, Error: &flowrunnerapi.RunError{Code: "http_failed", Message: "boom"}},
		flowrunnerapi.RunSummary{ID: "r2", FlowID: id, FlowVersion: 2, Status: "completed", StartedAt: "2026-11-24T04:09:00Z", DurationMS: ms(420)},
	)
	for n := 1; n <= 20; n++ {
		s.fr.addRuns(s.ws, flowrunnerapi.RunSummary{ID: "old-" + strconv.Itoa(n), FlowID: id, FlowVersion: 1, Status: "completed",
			StartedAt: "2026-11-24T03:" + fmt.Sprintf("%02d", 59-n) + ":00Z", DurationMS: ms(7)})
	}

	page := s.b.get(flowPath)
	if page.status != http.StatusOK {
		t.Fatalf("GET the flow = %d: %s", page.status, page.body)
	}
	mustContain(t, page, `<h2 id="versions-heading">Versions</h2>`,
		`<th scope="row">3 <span class="desc">published</span></th>`, `<td data-label="Nodes">4</td>`, `<td data-label="Definition">shown below</td>`,
		`<a href="`+flowPath+`?version=2#definition-heading">View version 2</a>`, `<a href="`+flowPath+`?version=1#definition-heading">View version 1</a>`,
		`<h3 id="definition-heading">Definition of version 3</h3>`, "<pre>"+html.EscapeString(versionDocument("Order status", 3))+"</pre>",
		// The publish box starts from the definition shown.
		">"+html.EscapeString(versionDocument("Order status", 3))+"</textarea>", "The box starts with version 3's document",
		// The runs, newest first, each linked to its trace.
		`<a href="`+flowPath+`/runs/r4"><code>r4</code></a>`, `<td data-label="Duration">not ended</td>`,
		`<a href="`+flowPath+`/runs/r3"><code>r3</code></a>`, `status-failed">failed</span><span class="desc"><code>http_failed</code></span>`,
		`<td data-label="Started"><time datetime="2026-11-24T04:10:00Z">2026-11-24 04:10 UTC</time></td>`, `<td data-label="Duration">1.5 s</td>`,
		`<td data-label="Tokens">1234</td>`, `<td data-label="Cost">$0.00185</td>`, `<td data-label="Duration">420 ms</td>`,
		`<label for="run-status">Status</label>`)
	mustShowMinutes(t, page)
	if strings.Contains(page.body, "<code>r-other</code>") {
		t.Fatal("another flow's run is listed on this flow's page")
	}
	at := func(runID string) int { return strings.Index(page.body, "<code>"+runID+"</code>") }
	if at("r4") > at("r3") || at("r3") > at("r2") {
		t.Fatal("the runs are not newest first")
	}
	c := s.fr.lastCall(t, http.MethodGet, "/admin/workspaces/"+s.ws+"/runs")
	if q, _ := url.ParseQuery(c.query); q.Get("flow_id") != id || q.Get("limit") != strconv.Itoa(20) || q.Get("before") != "" {
		t.Fatalf("the runs were read with %q", c.query)
	}
	for _, path := range []string{"/admin/flows/" + id + "/versions", "/admin/flows/" + id + "/versions/3"} {
		if c := s.fr.lastCall(t, http.MethodGet, path); c.query != "workspace_id="+s.ws {
			t.Fatalf("%s went with %q: the workspace must go with it", path, c.query)
		}
	}

	// The older page, by the link; the filters are kept.
	older := regexp.MustCompile(`href="([^"]+)" rel="next">Older runs`).FindStringSubmatch(page.body)
	if older == nil {
		t.Fatalf("no link to older runs: %s", page.body)
	}
	next := s.b.get(html.UnescapeString(older[1]))
	mustContain(t, next, `<code>old-`+strconv.Itoa(20)+`</code>`)
	if strings.Contains(next.body, "<code>r3</code>") || strings.Contains(next.body, "Older runs") {
		t.Fatalf("the older page = %s", next.body)
	}

	// A status filter; another version's definition.
	failed := s.b.get(flowPath + "?status=failed&version=1")
	mustContain(t, failed, `<option value="failed" selected>`, "<code>r3</code>", `<h3 id="definition-heading">Definition of version 1</h3>`,
		"<pre>"+html.EscapeString(versionDocument("Order status", 1))+"</pre>", `<td data-label="Definition">shown below</td>`,
		`<a href="`+flowPath+`?version=3#definition-heading">View version 3</a>`)
	if strings.Contains(failed.body, "<code>r2</code>") || strings.Contains(failed.body, "<code>r4</code>") {
		t.Fatal("the status filter let other runs through")
	}
	mustContain(t, s.b.get(flowPath+"?status=waiting"), "<code>r4</code>")
	if r := s.b.get(base + "/flows/" + other + "?status=failed"); !strings.Contains(r.body, "No runs with status failed yet.") {
		t.Fatalf("no runs of a status: %s", r.body)
	}

	// A version the flow lacks, or no version at all: 404, said in words,
	// with the versions to choose from.
	for _, v := range []string{"7", "x", "0"} {
		r := s.b.get(flowPath + "?version=" + v)
		if r.status != http.StatusNotFound {
			t.Fatalf("version %s = %d", v, r.status)
		}
		mustContain(t, r, "This flow has no such version", `View version 1</a>`)
	}
	// A filter the flow-runner refuses is said in words.
	r := s.b.get(flowPath + "?status=bogus")
	if r.status != http.StatusBadRequest {
		t.Fatalf("a bogus status = %d", r.status)
	}
	mustContain(t, r, "Status must be one of waiting, completed, failed.")
}

func TestPublishFlow(t *testing.T) {
	t.Parallel()
	s := newFlowsSetup(t)
	base := "/workspaces/" + s.ws
	doc := "{\n  \"name\": \"Order\",   \"nodes\": [{\"id\":\"start\",\"type\":\"start\"}]\n}"

	// From the textarea: the document goes byte for byte, and the flow's
	// page says what was published.
	r := s.b.postMultipart(base+"/flows", map[string]string{"csrf_token": s.csr, "document": doc}, nil)
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location(), base+"/flows/") || !strings.HasSuffix(r.location(), "?done=published&version=1") {
		t.Fatalf("publish = %d %q: %s", r.status, r.location(), r.body)
	}
	c := s.fr.lastCall(t, http.MethodPost, "/admin/workspaces/"+s.ws+"/flows")
	if string(c.body) != doc || c.query != "" || c.endpoint != "admin" {
		t.Fatalf("publish sent %+v", c)
	}
	mustContain(t, s.b.get(r.location()), `role="status">Published: version 1 is now the flow&#39;s published version.`)
	flowPath := strings.TrimSuffix(r.location(), "?done=published&version=1")
	flowID := strings.TrimPrefix(flowPath, base+"/flows/")

	// From a file, as a new version: the file wins over the textarea.
	fileDoc := []byte(`{"name":"Order","nodes":[{"id":"start","type":"start"},{"id":"end","type":"end"}]}`)
	r = s.b.postMultipart(flowPath+"/versions", map[string]string{"csrf_token": s.csr, "document": "ignored"},
		&upload{field: "file", name: "order.json", content: fileDoc})
	if r.status != http.StatusSeeOther || r.location() != flowPath+"?done=published&version=2" {
		t.Fatalf("publish a version = %d %q: %s", r.status, r.location(), r.body)
	}
	c = s.fr.lastCall(t, http.MethodPost, "/admin/workspaces/"+s.ws+"/flows")
	if string(c.body) != string(fileDoc) || c.query != "flow_id="+flowID {
		t.Fatalf("the version sent %q with query %q", c.body, c.query)
	}

	// A document near the flow-runner's 1 MiB, from a file, is not refused
	// by the console's own body limit.
	big := []byte(`{"name":"Order","description":"` + strings.Repeat("x", 900<<10) + `","nodes":[{"id":"start","type":"start"}]}`)
	r = s.b.postMultipart(flowPath+"/versions", map[string]string{"csrf_token": s.csr},
		&upload{field: "file", name: "big.json", content: big})
	if r.status != http.StatusSeeOther {
		t.Fatalf("publish a 900 KiB document = %d: %.300s", r.status, r.body)
	}
	if c := s.fr.lastCall(t, http.MethodPost, "/admin/workspaces/"+s.ws+"/flows"); len(c.body) != len(big) {
		t.Fatalf("the flow-runner got %d bytes of a %d-byte document", len(c.body), len(big))
	}

	// Without the CSRF token, neither publish reaches the flow-runner.
	calls := len(s.fr.received())
	for _, path := range []string{base + "/flows", flowPath + "/versions"} {
		if r := s.b.postMultipart(path, map[string]string{"document": doc}, nil); r.status != http.StatusForbidden {
			t.Fatalf("publish without the CSRF token to %s = %d", path, r.status)
		}
	}
	if got := len(s.fr.received()); got != calls {
		t.Fatalf("a publish without the CSRF token reached the flow-runner: %+v", s.fr.received()[calls:])
	}

	// Nothing to publish: said so, and nothing sent.
	r = s.b.postMultipart(base+"/flows", map[string]string{"csrf_token": s.csr, "document": "  \n"}, nil)
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "Paste a flow&#39;s JSON document") {
		t.Fatalf("an empty document = %d: %s", r.status, r.body)
	}
	for _, c := range s.fr.received()[calls:] {
		if c.method == http.MethodPost {
			t.Fatalf("an empty document was sent: %+v", c)
		}
	}
	// Not UTF-8: said so.
	r = s.b.postMultipart(base+"/flows", map[string]string{"csrf_token": s.csr}, &upload{field: "file", name: "x.json", content: []byte{0xff, 0xfe, '{'}})
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "is not UTF-8 text") {
		t.Fatalf("a file that is not UTF-8 = %d: %s", r.status, r.body)
	}
}

// TestPublishRefusalShownOnTheNode: the flow-runner's refusal names a
// node and a field; the page marks that node in the list of the submitted
// document's nodes, says the field and the reason, and keeps the text.
func TestPublishRefusalShownOnTheNode(t *testing.T) {
	t.Parallel()
	s := newFlowsSetup(t)
	base := "/workspaces/" + s.ws
	doc := "{\"name\":\"Order <script>\",\n \"nodes\":[{\"id\":\"start\",\"type\":\"start\",\"next\":\"ask\"},{\"id\":\"ask\",\"type\":\"ask\",\"next\":\"nowhere\"},{\"id\":\"end\",\"type\":\"end\"}]}"
	cases := []struct {
		refusal        *errs.Error
		flagged, where string
	}{
		{errs.InvalidRequest(`node "ask": field "next": unknown node "nowhere"`).WithExtra("node_id", "ask").WithExtra("field", "next").WithExtra("reason", `unknown node "nowhere"`),
			`<code>ask</code> <span class="type">ask</span>`, "Refused at node &#34;ask&#34;, field next"},
		{errs.InvalidRequest(`field "nodes[2].id": "" is not a node id (1-128 characters, no / or newline)`).WithExtra("field", "nodes[2].id").WithExtra("reason", `"" is not a node id (1-128 characters, no / or newline)`),
			`<code>end</code> <span class="type">end</span>`, "Refused at node number 3, field nodes[2].id"},
	}
	for _, tc := range cases {
		s.fr.mu.Lock()
		s.fr.refuse["POST /admin/workspaces/:ws/flows"] = tc.refusal
		s.fr.mu.Unlock()
		r := s.b.postMultipart(base+"/flows", map[string]string{"csrf_token": s.csr, "document": doc}, nil)
		if r.status != http.StatusBadRequest {
			t.Fatalf("a refused document = %d: %s", r.status, r.body)
		}
		mustContain(t, r, "The flow-runner refused this document", tc.where,
			`<li class="flagged">`+tc.flagged, `aria-invalid="true"`,
			// The submitted text is back in the textarea, escaped.
			`>`+html.EscapeString(doc)+`</textarea>`)
		if n := strings.Count(r.body, `class="flagged"`); n != 1 {
			t.Fatalf("%d nodes marked, want 1: %s", n, r.body)
		}
		if strings.Contains(r.body, "<script>") {
			t.Fatal("the submitted text reached the page unescaped")
		}
	}
	// A refusal about the document itself marks no node.
	s.fr.mu.Lock()
	s.fr.refuse["POST /admin/workspaces/:ws/flows"] = errs.InvalidRequest("not a JSON object: unexpected end of JSON input").WithExtra("reason", "not a JSON object: unexpected end of JSON input")
	s.fr.mu.Unlock()
	r := s.b.postMultipart(base+"/flows", map[string]string{"csrf_token": s.csr, "document": `{"name":`}, nil)
	mustContain(t, r, "Refused at the document", "not a JSON object: unexpected end of JSON input")
	if strings.Contains(r.body, `class="flagged"`) {
		t.Fatal("a refusal of the whole document marked a node")
	}
}

func TestDeactivateFlow(t *testing.T) {
	t.Parallel()
	s := newFlowsSetup(t)
	base := "/workspaces/" + s.ws
	id := s.fr.addFlow(s.ws, "Order status", 1)

	confirm := s.b.get(base + "/flows/" + id + "/deactivate")
	if confirm.status != http.StatusOK {
		t.Fatalf("the confirmation = %d", confirm.status)
	}
	mustContain(t, confirm, "<h1>Deactivate Order status?</h1>", `action="`+base+`/flows/`+id+`/deactivate"`, `name="csrf_token"`)

	path := "/admin/flows/" + id + "/deactivate"
	if r := s.b.do(http.MethodPost, base+"/flows/"+id+"/deactivate", url.Values{}, nil); r.status != http.StatusForbidden {
		t.Fatalf("without the CSRF token = %d", r.status)
	}
	if s.fr.receivedAny(http.MethodPost, path) {
		t.Fatal("a post without the CSRF token reached the flow-runner")
	}
	r := s.b.do(http.MethodPost, base+"/flows/"+id+"/deactivate", url.Values{"csrf_token": {s.csr}}, nil)
	if r.status != http.StatusSeeOther || r.location() != base+"/flows?done=deactivated" {
		t.Fatalf("deactivate = %d %q: %s", r.status, r.location(), r.body)
	}
	s.fr.lastCall(t, http.MethodPost, path)
	// The flow stays listed, inactive, and its page opens without the way
	// to deactivate it again.
	list := s.b.get(r.location())
	mustContain(t, list, "The flow was deactivated", `<a href="`+base+`/flows/`+id+`">Order status</a>`, `status-inactive">inactive</span>`)
	page := s.b.get(base + "/flows/" + id)
	mustContain(t, page, `status-inactive">inactive</span>`, "Publishing makes the flow active again.")
	if page.status != http.StatusOK || strings.Contains(page.body, "Deactivate this flow") {
		t.Fatalf("an inactive flow's page = %d: %s", page.status, page.body)
	}

	// The flow-runner's refusal is said on the flow's page.
	id = s.fr.addFlow(s.ws, "Busy", 1)
	s.fr.mu.Lock()
	s.fr.refuse["POST /admin/flows/:id/deactivate"] = errs.New(http.StatusTooManyRequests, errs.CodeRateLimited, "too many admin calls; retry in 3 s")
	s.fr.mu.Unlock()
	r = s.b.do(http.MethodPost, base+"/flows/"+id+"/deactivate", url.Values{"csrf_token": {s.csr}}, nil)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("a refused deactivation = %d", r.status)
	}
	mustContain(t, r, `role="alert" id="page-error">Too many admin calls; retry in 3 s.</p>`, "<h1>Busy</h1>")
}

func TestRunTrace(t *testing.T) {
	t.Parallel()
	s := newFlowsSetup(t)
	base := "/workspaces/" + s.ws
	flowID := s.fr.addFlow(s.ws, "Order status", 1)
	completed := "2026-11-24T04:00:01.055869Z"
	s.fr.mu.Lock()
	s.fr.traces[s.ws+" r1"] = flowrunnerapi.Trace{
		Run: flowrunnerapi.Run{ID: "r1", FlowID: flowID, Status: "failed", CurrentNodeID: "call", NodesExecuted: 2,
			Vars: map[string]any{"order": "A-1"}, Output: map[string]any{}, Error: &flowrunnerapi.RunError{Code: "http_failed", Message: "boom"},
			StartedAt: "2026-11-24T04:00:00Z", CompletedAt: &completed},
		NodeRuns: []flowrunnerapi.NodeRun{
			{NodeID: "answer", NodeType: "ai", StartedAt: "2026-11-24T04:00:00Z", DurationMS: 420, Input: map[string]any{"prompt": "<script>alert(1)</script>"},
				Output: map[string]any{"text": "ok"}, Tokens: 1234, CostUSD: 0.00185},
			{NodeID: "call", NodeType: "http", StartedAt: "2026-11-24T04:00:00Z", DurationMS: 900, Input: map[string]any{"url": "https://example.com"}, Error: "HTTP 500"},
		},
	}
	s.fr.mu.Unlock()

	// The flow page's form takes a run id to the run's page.
	if r := s.b.get(base + "/flows/" + flowID + "/runs?run_id=+r1+"); r.status != http.StatusSeeOther || r.location() != base+"/flows/"+flowID+"/runs/r1" {
		t.Fatalf("the run form = %d %q", r.status, r.location())
	}
	if r := s.b.get(base + "/flows/" + flowID + "/runs?run_id="); r.status != http.StatusBadRequest || !strings.Contains(r.body, `id="run-error">Type the run id`) {
		t.Fatalf("the run form without an id = %d: %s", r.status, r.body)
	}

	r := s.b.get(base + "/flows/" + flowID + "/runs/r1")
	if r.status != http.StatusOK {
		t.Fatalf("GET the run = %d: %s", r.status, r.body)
	}
	mustContain(t, r, "<h1>Run <code>r1</code></h1>", `status-failed">failed</span>`, "<code>http_failed</code>: boom",
		"<dt>Tokens</dt><dd>1234</dd>", "<dt>Cost</dt><dd>$0.00185</dd>", "<dt>Time in nodes</dt><dd>1320 ms</dd>",
		`<th scope="row"><code>answer</code></th>`, `<td data-label="Type">ai</td>`, `status-completed">completed</span>`,
		`<td data-label="Time (ms)">420</td>`, `<td data-label="Tokens">1234</td>`, `<td data-label="Cost">$0.00185</td>`,
		`<th scope="row"><code>call</code></th>`, `status-failed">failed</span><span class="desc">HTTP 500</span>`,
		`<details><summary>Input</summary><pre>{`, `&#34;prompt&#34;: &#34;\u003cscript\u003ealert(1)\u003c/script\u003e&#34;`,
		`&#34;order&#34;: &#34;A-1&#34;`, `href="`+base+`/flows/`+flowID+`"`,
		// Minutes for the eye, the exact time for machines and screen readers.
		`<dt>Started</dt><dd><time datetime="2026-11-24T04:00:00Z">2026-11-24 04:00 UTC</time></dd>`,
		`<dt>Completed</dt><dd><time datetime="2026-11-24T04:00:01.055869Z">2026-11-24 04:00 UTC</time></dd>`)
	mustShowMinutes(t, r)
	if strings.Contains(r.body, "<script>") {
		t.Fatal("a node's input reached the page unescaped")
	}
	if c := s.fr.lastCall(t, http.MethodGet, "/v1/flows/"+flowID+"/runs/r1"); c.workspace != s.ws {
		t.Fatalf("the trace was read as %q", c.workspace)
	}

	// A run the flow-runner does not know: said in words, with what to do.
	r = s.b.get(base + "/flows/" + flowID + "/runs/r-unknown")
	if r.status != http.StatusNotFound {
		t.Fatalf("an unknown run = %d", r.status)
	}
	mustContain(t, r, "Run not found. Check the run id: it is the run_id the flow&#39;s invoke answered")
}

// TestFlowServiceErrorsInWords: what the flow-runner answers, or its
// silence, is said on the page with the status.
func TestFlowServiceErrorsInWords(t *testing.T) {
	t.Parallel()
	s := newFlowsSetup(t)
	base := "/workspaces/" + s.ws
	s.fr.mu.Lock()
	s.fr.refuse["GET /admin/workspaces/:ws/flows"] = errs.New(http.StatusTooManyRequests, errs.CodeRateLimited, "too many calls; retry in 2 s")
	s.fr.mu.Unlock()
	r := s.b.get(base + "/flows")
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("a refused list = %d", r.status)
	}
	mustContain(t, r, "Too many calls; retry in 2 s.", "Sign out", "Publish a new flow")

	// No flow-runner at all: every page says so.
	down := defaults()
	down.withoutFlowRunner = true
	_, ws, b := signedInToAcmeWith(t, down)
	for _, path := range []string{"/flows", "/flows/f1", "/flows/f1/runs/r1", "/kb"} {
		r := b.get("/workspaces/" + ws + path)
		if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "A service the console needs did not answer (flow-runner") {
			t.Fatalf("GET %s without a flow-runner = %d: %s", path, r.status, r.body)
		}
	}
}

// TestFlowPagesRefuseAnotherWorkspace: a workspace operator gets 404 for
// every flow and knowledge-base page and action of another workspace, and
// none of them reaches the flow-runner; nor can it deactivate another
// workspace's flow by naming it under its own workspace.
func TestFlowPagesRefuseAnotherWorkspace(t *testing.T) {
	t.Parallel()
	s := newFlowsSetup(t)
	other := s.h.workspace("Globex")
	theirFlow := s.fr.addFlow(other, "Theirs", 1)
	theirDoc := s.fr.addDocument(other, "Their handbook", 2)
	form := url.Values{"csrf_token": {s.csr}, "document": {`{"name":"x"}`}, "title": {"t"}, "markdown": {"m"}}
	for _, route := range []struct{ method, path string }{
		{http.MethodGet, "/flows"}, {http.MethodPost, "/flows"},
		{http.MethodGet, "/flows/" + theirFlow}, {http.MethodPost, "/flows/" + theirFlow + "/versions"},
		{http.MethodGet, "/flows/" + theirFlow + "/deactivate"}, {http.MethodPost, "/flows/" + theirFlow + "/deactivate"},
		{http.MethodGet, "/flows/" + theirFlow + "/runs?run_id=r1"}, {http.MethodGet, "/flows/" + theirFlow + "/runs/r1"},
		{http.MethodGet, "/kb"}, {http.MethodPost, "/kb"},
		{http.MethodGet, "/kb/" + theirDoc + "/delete"}, {http.MethodPost, "/kb/" + theirDoc + "/delete"},
	} {
		var f url.Values
		if route.method == http.MethodPost {
			f = form
		}
		r := s.b.do(route.method, "/workspaces/"+other+route.path, f, nil)
		if r.status != http.StatusNotFound || strings.Contains(r.body, "Theirs") || strings.Contains(r.body, "Their handbook") {
			t.Fatalf("%s %s of another workspace = %d: %s", route.method, route.path, r.status, r.body)
		}
	}
	if calls := s.fr.received(); len(calls) != 0 {
		t.Fatalf("another workspace's pages reached the flow-runner: %+v", calls)
	}

	// Under its own workspace, another's flow and document are not found,
	// and are neither deactivated, versioned nor deleted.
	own := "/workspaces/" + s.ws
	for _, path := range []string{"/flows/" + theirFlow + "/deactivate", "/kb/" + theirDoc + "/delete"} {
		if r := s.b.get(own + path); r.status != http.StatusNotFound {
			t.Fatalf("GET %s under its own workspace = %d", path, r.status)
		}
		if r := s.b.do(http.MethodPost, own+path, form, nil); r.status != http.StatusNotFound {
			t.Fatalf("POST %s under its own workspace = %d: %s", path, r.status, r.body)
		}
	}
	if r := s.b.do(http.MethodPost, own+"/flows/"+theirFlow+"/versions", form, nil); r.status != http.StatusNotFound {
		t.Fatalf("a version of another workspace's flow = %d: %s", r.status, r.body)
	}
	if s.fr.receivedAny(http.MethodPost, "/admin/flows/"+theirFlow+"/deactivate") {
		t.Fatal("another workspace's flow was deactivated")
	}
	if c := s.fr.lastCall(t, http.MethodDelete, "/admin/kb/documents/"+theirDoc); c.query != "workspace="+s.ws {
		t.Fatalf("the delete went without its workspace guard: %+v", c)
	}
	s.fr.mu.Lock()
	defer s.fr.mu.Unlock()
	if len(s.fr.flows[other]) != 1 || len(s.fr.docs[other]) != 1 {
		t.Fatal("another workspace's flow or document is gone")
	}
}
