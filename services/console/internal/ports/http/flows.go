package http

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/adminclient"
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/console/internal/app"
)

// maxFlowDocument is the largest flow document the flow-runner takes.
const maxFlowDocument = 1 << 20

// codeFlowNotFound is a flow the workspace's list does not hold.
const codeFlowNotFound = "flow_not_found"

// runsPerPage is how many runs the flow's page lists at a time.
const runsPerPage = 20

// mountFlows adds the flow and run pages to a workspace's group.
func (c *Console) mountFlows(ws *echo.Group) {
	ws.GET("/flows", c.flowsPage)
	ws.POST("/flows", c.publishNewFlow)
	ws.GET("/flows/:flowId", c.flowPage)
	ws.POST("/flows/:flowId/versions", c.publishFlowVersion)
	ws.GET("/flows/:flowId/deactivate", c.deactivateFlowForm)
	ws.POST("/flows/:flowId/deactivate", c.deactivateFlow)
	ws.GET("/flows/:flowId/runs", c.findRun)
	ws.GET("/flows/:flowId/runs/:runId", c.runPage)
}

// flowsView is the flows template's data: the list, one flow's page, or
// the confirmation of a deactivation, by which of List, Flow and Confirm
// is set.
type flowsView struct {
	Flash string
	// List is the workspace's flows on the list page.
	List []flowrunnerapi.WorkspaceFlow
	// Flow is the flow of its own page or of the deactivation's
	// confirmation.
	Flow    *flowrunnerapi.WorkspaceFlow
	Confirm bool
	// Versions are the flow's versions, newest first; Shown is the one
	// whose Definition (its document as published) the page shows.
	Versions   []flowrunnerapi.FlowVersion
	Shown      int
	Definition string
	// Runs are a page of the flow's runs, RunStatus the filter they were
	// read with, and OlderRuns the next page's link (empty on the last).
	Runs      []runRow
	RunStatus string
	OlderRuns string
	Publish   publishForm
	// RunID is what was typed in the run form; RunMessage says what was
	// wrong with it.
	RunID      string
	RunMessage string
}

// RunStatuses are the choices of the runs' status filter.
func (flowsView) RunStatuses() []string { return []string{"completed", "failed", "waiting"} }

// Active reports whether the page's flow is active.
func (fv flowsView) Active() bool { return fv.Flow != nil && fv.Flow.Status == "active" }

// runRow is a run in the flow page's list, its numbers written out.
type runRow struct {
	flowrunnerapi.RunSummary
	Duration  string
	Cost      string
	TracePath string
}

// publishForm is the publish form with what was submitted and, when the
// flow-runner refused it, where.
type publishForm struct {
	Action   string
	Document string
	Problem  *app.FlowProblem
	// Nodes are the submitted document's nodes, the refused one Flagged.
	Nodes []outlinedNode
}

type outlinedNode struct {
	app.OutlinedNode
	Flagged bool
}

// Where says in words where the problem is.
func (f publishForm) Where() string {
	p := f.Problem
	var parts []string
	switch {
	case p.NodeID != "":
		parts = append(parts, "node "+strconv.Quote(p.NodeID))
	case p.NodeIndex >= 0:
		parts = append(parts, "node number "+strconv.Itoa(p.NodeIndex+1))
	}
	if p.Field != "" {
		parts = append(parts, "field "+p.Field)
	}
	if len(parts) == 0 {
		return "the document"
	}
	return strings.Join(parts, ", ")
}

// workspacePath is the path of workspace id's pages.
func workspacePath(id string) string { return "/workspaces/" + url.PathEscape(id) }

func flowPath(ctx echo.Context, flowID string) string {
	return workspacePath(ctx.Param("id")) + "/flows/" + url.PathEscape(flowID)
}

func (c *Console) flowsView(ctx echo.Context, title string) view {
	v := c.view(ctx, title)
	v.Workspace, v.Current = ctx.Param("id"), "flows"
	return v
}

// flowsPage lists the workspace's flows with the form publishing a new one.
func (c *Console) flowsPage(ctx echo.Context) error {
	return c.drawFlows(ctx, http.StatusOK, "", flowsView{Flash: flowsFlash(ctx)})
}

// drawFlows draws the list with fv's form and message.
func (c *Console) drawFlows(ctx echo.Context, status int, message string, fv flowsView) error {
	v := c.flowsView(ctx, "Flows")
	fv.Publish.Action = workspacePath(ctx.Param("id")) + "/flows"
	flows, err := c.app.Flows(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"))
	fv.List = flows
	if fv.List == nil {
		fv.List = []flowrunnerapi.WorkspaceFlow{}
	}
	v.Page = fv
	if err != nil {
		return c.flowsError(ctx, "flows", v, err)
	}
	v.Status, v.Message = status, message
	return c.render(ctx, status, "flows", v)
}

// flowPage shows a flow: its versions with one's definition (the
// published one, or ?version=N), its runs (filtered by ?status=, paged by
// ?before=), the form publishing a new version, the run form and the way
// to deactivate it.
func (c *Console) flowPage(ctx echo.Context) error {
	return c.drawFlow(ctx, http.StatusOK, "", flowsView{Flash: flowsFlash(ctx)})
}

func (c *Console) drawFlow(ctx echo.Context, status int, message string, fv flowsView) error {
	v := c.flowsView(ctx, "Flow")
	r, op, ws := ctx.Request(), operatorOf(ctx), ctx.Param("id")
	f, err := c.app.Flow(r.Context(), op, ws, ctx.Param("flowId"))
	if err != nil {
		return c.flowsError(ctx, "flows", v, err)
	}
	fv.Flow = &f
	fv.Publish.Action = flowPath(ctx, f.ID) + "/versions"
	v.Title, v.Page = f.Name, fv
	versions, err := c.app.FlowVersions(r.Context(), op, ws, f.ID)
	if err != nil {
		return c.flowsError(ctx, "flows", v, err)
	}
	fv.Versions, fv.Shown = versions.Versions, versions.PublishedVersion
	if q := ctx.QueryParam("version"); q != "" {
		if fv.Shown, err = strconv.Atoi(q); err != nil || fv.Shown < 1 {
			fv.Shown, v.Page = 0, fv
			return c.flowsError(ctx, "flows", v, app.ErrVersionNotFound)
		}
	}
	doc, err := c.app.FlowVersion(r.Context(), op, ws, f.ID, fv.Shown)
	if err != nil {
		fv.Shown, v.Page = 0, fv
		return c.flowsError(ctx, "flows", v, err)
	}
	fv.Definition = string(doc)
	if fv.Publish.Document == "" {
		// A new version starts as the definition shown, to be edited.
		fv.Publish.Document = fv.Definition
	}
	fv.RunStatus = ctx.QueryParam("status")
	page, err := c.app.Runs(r.Context(), op, ws, adminclient.RunFilter{FlowID: f.ID, Status: fv.RunStatus, Before: ctx.QueryParam("before"), Limit: runsPerPage})
	if err != nil {
		v.Page = fv
		return c.flowsError(ctx, "flows", v, err)
	}
	for _, run := range page.Runs {
		fv.Runs = append(fv.Runs, runRow{RunSummary: run, Duration: duration(run.DurationMS), Cost: dollars(run.Usage.CostUSD),
			TracePath: flowPath(ctx, f.ID) + "/runs/" + url.PathEscape(run.ID)})
	}
	if page.NextBefore != nil {
		older := url.Values{"before": {*page.NextBefore}}
		if fv.RunStatus != "" {
			older.Set("status", fv.RunStatus)
		}
		if q := ctx.QueryParam("version"); q != "" {
			older.Set("version", q)
		}
		fv.OlderRuns = flowPath(ctx, f.ID) + "?" + older.Encode() + "#runs-heading"
	}
	v.Page = fv
	v.Status, v.Message = status, message
	return c.render(ctx, status, "flows", v)
}

// duration writes a run's duration, or says it has not ended.
func duration(ms *int64) string {
	switch {
	case ms == nil:
		return "not ended"
	case *ms < 1000:
		return strconv.FormatInt(*ms, 10) + " ms"
	}
	return strconv.FormatFloat(float64(*ms)/1000, 'f', -1, 64) + " s"
}

// publishNewFlow publishes the submitted document as a new flow.
func (c *Console) publishNewFlow(ctx echo.Context) error {
	return c.publish(ctx, "")
}

// publishFlowVersion publishes the submitted document as the flow's next
// version.
func (c *Console) publishFlowVersion(ctx echo.Context) error {
	return c.publish(ctx, ctx.Param("flowId"))
}

// publish sends the document from the textarea, or from the chosen file
// when there is one, and goes to the flow's page; a refusal redraws the
// form with the text kept and the node that caused it marked.
func (c *Console) publish(ctx echo.Context, flowID string) error {
	redraw := c.drawFlows
	if flowID != "" {
		redraw = c.drawFlow
	}
	document, err := submittedText(ctx, "document", "file", maxFlowDocument)
	if err != nil {
		return redraw(ctx, http.StatusBadRequest, err.Error(), flowsView{})
	}
	fv := flowsView{Publish: publishForm{Document: document}}
	if strings.TrimSpace(document) == "" {
		return redraw(ctx, http.StatusBadRequest, "Paste a flow's JSON document into the box, or choose a file with one, then publish.", fv)
	}
	published, err := c.app.PublishFlow(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"), flowID, formID(ctx), []byte(document))
	where := "the flows below"
	if flowID != "" {
		where = "the flow's versions below"
	}
	if repeated, answer := c.formRepeat(ctx, err, func(flowID string) string {
		return flowPath(ctx, flowID) + "?done=published"
	}, where, func(status int, message string) error {
		return redraw(ctx, status, message, fv)
	}); repeated {
		return answer
	}
	var refused *app.FlowRefusedError
	if errors.As(err, &refused) {
		p := refused.Problem
		fv.Publish.Problem = &p
		for _, n := range app.OutlineFlow([]byte(document)) {
			fv.Publish.Nodes = append(fv.Publish.Nodes, outlinedNode{OutlinedNode: n, Flagged: p.Names(n)})
		}
		return redraw(ctx, http.StatusBadRequest, "The flow-runner refused this document: fix it where marked below and publish again.", fv)
	}
	if e, message, ok := c.refusal(ctx, "flows", err); ok {
		return redraw(ctx, e.Status, message+hintFor(e.Code), fv)
	}
	if err != nil {
		return c.flowsError(ctx, "flows", c.flowsView(ctx, "Flows"), err)
	}
	return ctx.Redirect(http.StatusSeeOther, flowPath(ctx, published.ID)+"?done=published&version="+strconv.Itoa(published.PublishedVersion))
}

// submittedText is the text of the form's file field when a file was
// chosen, else of its text field; at most limit bytes, and UTF-8.
func submittedText(ctx echo.Context, textField, fileField string, limit int64) (string, error) {
	text := ctx.FormValue(textField)
	fh, err := ctx.FormFile(fileField)
	if err != nil {
		// No file chosen (or a form that cannot carry one): the text.
		return text, nil
	}
	f, err := fh.Open()
	if err != nil {
		return text, errors.New("The chosen file could not be read. Choose it again, or paste its text.")
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return text, errors.New("The chosen file could not be read. Choose it again, or paste its text.")
	}
	if int64(len(raw)) > limit {
		return text, errors.New("The chosen file is larger than " + strconv.FormatInt(limit>>10, 10) + " KiB.")
	}
	if len(raw) == 0 {
		return text, nil
	}
	s := string(raw)
	if !utf8.ValidString(s) {
		return text, errors.New("The chosen file is not UTF-8 text. Save it as UTF-8 and choose it again.")
	}
	return s, nil
}

// deactivateFlowForm asks to confirm a deactivation.
func (c *Console) deactivateFlowForm(ctx echo.Context) error {
	v := c.flowsView(ctx, "Deactivate flow")
	f, err := c.app.Flow(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"), ctx.Param("flowId"))
	if err != nil {
		return c.flowsError(ctx, "flows", v, err)
	}
	v.Page = flowsView{Flow: &f, Confirm: true}
	return c.render(ctx, http.StatusOK, "flows", v)
}

// deactivateFlow deactivates the flow and goes back to the list.
func (c *Console) deactivateFlow(ctx echo.Context) error {
	err := c.app.DeactivateFlow(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"), ctx.Param("flowId"))
	if e, message, ok := c.refusal(ctx, "flows", err); ok {
		return c.drawFlow(ctx, e.Status, message+hintFor(e.Code), flowsView{})
	}
	if err != nil {
		return c.flowsError(ctx, "flows", c.flowsView(ctx, "Flows"), err)
	}
	return ctx.Redirect(http.StatusSeeOther, workspacePath(ctx.Param("id"))+"/flows?done=deactivated")
}

// findRun takes the run id of the flow page's form to the run's page, so
// a run the page's list does not show (on an older page, or filtered out)
// is opened by the id its invoke answered.
func (c *Console) findRun(ctx echo.Context) error {
	runID := strings.TrimSpace(ctx.QueryParam("run_id"))
	if runID == "" {
		return c.drawFlow(ctx, http.StatusBadRequest, "", flowsView{RunMessage: "Type the run id an invoke answered (run_id), then open it."})
	}
	return ctx.Redirect(http.StatusSeeOther, flowPath(ctx, ctx.Param("flowId"))+"/runs/"+url.PathEscape(runID))
}

// runView is the run template's data.
type runView struct {
	FlowPath    string
	Run         flowrunnerapi.Run
	Vars        string
	Output      string
	Nodes       []nodeRunRow
	TotalTokens int
	TotalCost   string
	TotalMS     int64
}

// nodeRunRow is one node's step, its input and output as indented JSON.
type nodeRunRow struct {
	flowrunnerapi.NodeRun
	Status string
	Cost   string
	In     string
	Out    string
}

// runPage shows a run's trace: each node's type, status, time, tokens,
// cost, input and output.
func (c *Console) runPage(ctx echo.Context) error {
	v := c.flowsView(ctx, "Run")
	flowID, runID := ctx.Param("flowId"), ctx.Param("runId")
	t, err := c.app.RunTrace(ctx.Request().Context(), operatorOf(ctx), ctx.Param("id"), flowID, runID)
	if err != nil {
		return c.flowsError(ctx, "run", v, err)
	}
	v.Title = "Run " + t.Run.ID
	v.Page = traceView(t, flowPath(ctx, flowID))
	return c.render(ctx, http.StatusOK, "run", v)
}

// traceView is a run's trace as the run page draws it, with the link back
// to where it was opened from.
func traceView(t flowrunnerapi.Trace, back string) runView {
	rv := runView{FlowPath: back, Run: t.Run, Vars: indentJSON(t.Run.Vars), Output: indentJSON(t.Run.Output)}
	var cost float64
	for _, n := range t.NodeRuns {
		status := "completed"
		if n.Error != "" {
			status = "failed"
		}
		rv.Nodes = append(rv.Nodes, nodeRunRow{NodeRun: n, Status: status, Cost: dollars(n.CostUSD), In: indentJSON(n.Input), Out: indentJSON(n.Output)})
		rv.TotalTokens += n.Tokens
		rv.TotalMS += n.DurationMS
		cost += n.CostUSD
	}
	rv.TotalCost = dollars(cost)
	return rv
}

// indentJSON is v as indented JSON, for a <pre>.
func indentJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return ""
	}
	return string(b)
}

// dollars writes a cost in US dollars with the digits it has (costs of AI
// calls are fractions of a cent).
func dollars(usd float64) string {
	return "$" + strconv.FormatFloat(usd, 'f', -1, 64)
}

// flowsFlash says what the action that redirected here did.
func flowsFlash(ctx echo.Context) string {
	switch ctx.QueryParam("done") {
	case "published":
		if n, err := strconv.Atoi(ctx.QueryParam("version")); err == nil && n > 0 {
			return "Published: version " + strconv.Itoa(n) + " is now the flow's published version."
		}
		return "Published."
	case "deactivated":
		return "The flow was deactivated: invokes are refused and the API no longer lists it. Its versions and runs stay here; publishing a new version makes it active again."
	}
	return ""
}

// flowsError draws page with what went wrong: a flow that is not the
// workspace's is the 404 page; a service's refusal is said in words on
// the page, with what to do about it.
func (c *Console) flowsError(ctx echo.Context, page string, v view, err error) error {
	if errors.Is(err, app.ErrFlowNotFound) {
		return errs.NotFound(codeFlowNotFound, "this workspace has no such flow: check its id, or go back to the flows")
	}
	if errors.Is(err, app.ErrVersionNotFound) {
		v.Status, v.Message = http.StatusNotFound, "This flow has no such version: choose one from its list of versions."
		return c.render(ctx, http.StatusNotFound, page, v)
	}
	if e, message, ok := c.refusal(ctx, page, err); ok {
		v.Status, v.Message = e.Status, message+hintFor(e.Code)
		return c.render(ctx, e.Status, page, v)
	}
	return c.serviceError(ctx, page, v, err)
}

// hintFor says what to do about a flow-runner's refusal, when its message
// does not.
func hintFor(code string) string {
	switch code {
	case "run_not_found":
		return " Check the run id: it is the run_id the flow's invoke answered, for this flow."
	case codeFlowNotFound:
		return " Go back to the flows and reload."
	case "document_not_found":
		return " It may have been deleted already; reload the knowledge base."
	}
	return ""
}

func requestIDOf(ctx echo.Context) string {
	return ctx.Response().Header().Get(echo.HeaderXRequestID)
}
