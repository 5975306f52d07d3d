package e2e

import (
	"bytes"
	"html"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// greetingV2 is greetingFlow published again with another description,
// laid out as its author wrote it.
var greetingV2 = strings.Replace(greetingFlow, "Asks a name and greets", "Asks a name and greets, version 2", 1)

// TestConsoleFlowPages drives the console's flows pages over HTTP against
// the built console, gateway and flow-runner, as a workspace operator:
// every flow is listed (a chat-only and a deactivated one too); a flow's
// page shows its versions, each one's definition as published, and its
// runs with a link to each trace, which opens; another workspace's flows
// are refused as missing.
func TestConsoleFlowPages(t *testing.T) {
	t.Parallel()
	s := startSuite(t)
	console := s.startConsole(t)
	wsID, key := s.flowDeveloper(t)
	otherWS, _ := s.flowDeveloper(t)

	flowID := s.publishFlow(t, wsID, greetingFlow)
	s.ctl(t, nil, "flow", "publish", "--workspace", wsID, "--flow", flowID, "--file", flowFile(t, greetingV2))
	chatID := s.publishFlow(t, wsID, `{"name": "Chat greeter", "triggers": ["chat"], "nodes": [{"id": "start", "type": "start", "next": "done"}, {"id": "done", "type": "end"}]}`)
	goneID := s.publishFlow(t, wsID, strings.Replace(greetingFlow, `"Greeting"`, `"Retired greeting"`, 1))
	s.ctl(t, nil, "flow", "deactivate", "--flow", goneID)
	theirs := s.publishFlow(t, otherWS, strings.Replace(greetingFlow, `"Greeting"`, `"Their greeting"`, 1))
	status, _, inv := s.api(t, key, http.MethodPost, invokePath(flowID), map[string]any{"input": map[string]any{"vip": true}})
	runID, _ := inv["run_id"].(string)
	if status != http.StatusOK || inv["status"] != "waiting" || runID == "" {
		t.Fatalf("invoke = %d %v", status, inv)
	}

	email, password := "flows-"+uuid.NewString()[:8]+"@example.com", "correct horse battery staple"
	s.createOperator(t, email, wsID, password)
	c := signInConsole(t, console, email, password)
	base := "/workspaces/" + wsID

	list := c.get(base+"/flows", http.StatusOK)
	for _, want := range []string{
		`<a href="` + base + `/flows/` + flowID + `">Greeting</a>`, `<a href="` + base + `/flows/` + chatID + `">Chat greeter</a>`,
		`<a href="` + base + `/flows/` + goneID + `">Retired greeting</a>`, `status-inactive">inactive</span>`, `<td data-label="Triggers">chat</td>`,
	} {
		if !strings.Contains(list, want) {
			t.Fatalf("the flows page lacks %q:\n%s", want, list)
		}
	}
	if strings.Contains(list, "Their greeting") {
		t.Fatal("the flows page lists another workspace's flow")
	}

	flowPath := base + "/flows/" + flowID
	page := c.get(flowPath, http.StatusOK)
	tracePath := flowPath + "/runs/" + runID
	for _, want := range []string{
		`<th scope="row">2 <span class="desc">published</span></th>`, `<td data-label="Nodes">6</td>`,
		`<h3 id="definition-heading">Definition of version 2</h3>`, "<pre>" + html.EscapeString(greetingV2) + "</pre>",
		`<a href="` + flowPath + `?version=1#definition-heading">View version 1</a>`,
		`<a href="` + tracePath + `"><code>` + runID + `</code></a>`, `status-waiting">waiting</span>`, `<td data-label="Duration">not ended</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Fatalf("the flow's page lacks %q:\n%s", want, page)
		}
	}
	if v1 := c.get(flowPath+"?version=1", http.StatusOK); !strings.Contains(v1, "<pre>"+html.EscapeString(greetingFlow)+"</pre>") {
		t.Fatalf("version 1's definition is not shown as published:\n%s", v1)
	}
	trace := c.get(tracePath, http.StatusOK)
	for _, want := range []string{"<h1>Run <code>" + runID + "</code></h1>", `<th scope="row"><code>ask</code></th>`, "<dt>Tokens</dt>", "<dt>Cost</dt>"} {
		if !strings.Contains(trace, want) {
			t.Fatalf("the run's trace lacks %q:\n%s", want, trace)
		}
	}
	// A document the flow-runner refuses: the page marks the node the
	// refusal names, from the fields the flow-runner sends beside its
	// message.
	token := csrfField.FindStringSubmatch(list)
	if token == nil {
		t.Fatalf("the flows page has no csrf_token field:\n%s", list)
	}
	broken := `{"name": "Broken", "triggers": ["api"], "nodes": [{"id": "start", "type": "start", "next": "ask"},
		{"id": "ask", "type": "send_message", "message": {"type": "text", "text": "hi"}, "next": "nowhere"}, {"id": "done", "type": "end"}]}`
	refused := c.postMultipart(base+"/flows", map[string]string{"csrf_token": token[1], "document": broken}, http.StatusBadRequest)
	for _, want := range []string{`<li class="flagged"><code>ask</code>`, "Refused at node &#34;ask&#34;, field next", `unknown node &#34;nowhere&#34;`} {
		if !strings.Contains(refused, want) {
			t.Fatalf("the refused document's page lacks %q:\n%s", want, refused)
		}
	}

	if gone := c.get(base+"/flows/"+goneID, http.StatusOK); !strings.Contains(gone, "Publishing makes the flow active again.") {
		t.Fatalf("the deactivated flow's page:\n%s", gone)
	}

	// Another workspace's flow: missing under this workspace, and the other
	// workspace's pages are refused.
	for _, path := range []string{base + "/flows/" + theirs, base + "/flows/" + theirs + "?version=1", "/workspaces/" + otherWS + "/flows/" + theirs} {
		if body := c.get(path, http.StatusNotFound); strings.Contains(body, "Their greeting") {
			t.Fatalf("GET %s shows another workspace's flow", path)
		}
	}
}

// consoleClient is an HTTP client of the console, with its cookies, that
// checks each redirect rather than following it.
type consoleClient struct {
	t       *testing.T
	console string
	client  *http.Client
}

// newConsoleClient is a client of the console at console, not signed in.
func newConsoleClient(t *testing.T, console string) *consoleClient {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &consoleClient{t: t, console: console, client: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signInConsole is a client of the console signed in as email.
func signInConsole(t *testing.T, console, email, password string) *consoleClient {
	t.Helper()
	c := newConsoleClient(t, console)
	c.signIn(email, password)
	return c
}

// signIn sends the sign-in form as email; it must answer 303 to home.
func (c *consoleClient) signIn(email, password string) {
	c.t.Helper()
	page := c.get("/login", http.StatusOK)
	token := csrfField.FindStringSubmatch(page)
	if token == nil {
		c.t.Fatalf("the sign-in page of %s has no csrf_token field:\n%s", c.console, page)
	}
	form := url.Values{"csrf_token": {token[1]}, "email": {email}, "password": {password}}
	req, err := http.NewRequest(http.MethodPost, c.console+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.console)
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("POST %s/login: %v", c.console, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		c.t.Fatalf("signing in to %s as %s = %d to %q, want 303 to /", c.console, email, resp.StatusCode, resp.Header.Get("Location"))
	}
}

// postMultipart sends fields as the browser sends a form with a file
// field (multipart, with the console's Origin) and fails the test unless
// the console answers want.
func (c *consoleClient) postMultipart(path string, fields map[string]string, want int) string {
	c.t.Helper()
	var body bytes.Buffer
	form := multipart.NewWriter(&body)
	for name, value := range fields {
		if err := form.WriteField(name, value); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := form.Close(); err != nil {
		c.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, c.console+path, &body)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", form.FormDataContentType())
	req.Header.Set("Origin", c.console)
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("POST %s%s: %v", c.console, path, err)
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != want {
		c.t.Fatalf("POST %s%s = %d, want %d:\n%s", c.console, path, resp.StatusCode, want, page)
	}
	return string(page)
}

// get reads path and fails the test unless it answers want.
func (c *consoleClient) get(path string, want int) string {
	c.t.Helper()
	_, body := c.fetch(path, want)
	return body
}

// fetch is get with the response, for its headers.
func (c *consoleClient) fetch(path string, want int) (*http.Response, string) {
	c.t.Helper()
	resp, err := c.client.Get(c.console + path)
	if err != nil {
		c.t.Fatalf("GET %s%s: %v", c.console, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != want {
		c.t.Fatalf("GET %s%s = %d, want %d:\n%s", c.console, path, resp.StatusCode, want, body)
	}
	return resp, string(body)
}
