package http

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/ids"
	"github.com/parleyhq/parley/pkg/paging"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// CodeVersionNotFound is a version its flow does not have.
const CodeVersionNotFound = "flow_version_not_found"

// The operators' reads of flows, their versions and runs (the console's
// flows pages, parleyctl): every flow whatever its status and triggers,
// unlike the public list.

// workspaceQuery is the required workspace_id query parameter of the
// routes under /admin/flows/:id, which reads a flow only when it is that
// workspace's.
func workspaceQuery(c echo.Context) (string, error) {
	ws := c.QueryParam("workspace_id")
	if ws == "" {
		return "", errs.InvalidRequest("workspace_id is required: the workspace the flow belongs to")
	}
	if !ids.Valid(ws) {
		return "", errs.InvalidID("workspace_id", "workspace")
	}
	return ws, nil
}

// optionalWorkspaceQuery is the workspace_id query parameter of a route
// that takes it or not: "" when absent, checked like workspaceQuery when
// present.
func optionalWorkspaceQuery(c echo.Context) (string, error) {
	if c.QueryParam("workspace_id") == "" {
		return "", nil
	}
	return workspaceQuery(c)
}

func (h *handlers) listAllFlows(c echo.Context) error {
	ws, err := adminWorkspace(c)
	if err != nil {
		return err
	}
	flows, err := h.app.ListAllFlows(c.Request().Context(), ws)
	if err != nil {
		return toHTTPError(err)
	}
	out := flowrunnerapi.WorkspaceFlowsResponse{Flows: make([]flowrunnerapi.WorkspaceFlow, 0, len(flows))}
	for _, f := range flows {
		out.Flows = append(out.Flows, toAPIWorkspaceFlow(f))
	}
	return c.JSON(http.StatusOK, out)
}

func (h *handlers) listFlowVersions(c echo.Context) error {
	ws, err := workspaceQuery(c)
	if err != nil {
		return err
	}
	f, versions, err := h.app.ListFlowVersions(c.Request().Context(), ws, c.Param("id"))
	if err != nil {
		return toHTTPError(err)
	}
	out := flowrunnerapi.FlowVersions{FlowID: f.ID, PublishedVersion: f.PublishedVersion, Versions: make([]flowrunnerapi.FlowVersion, 0, len(versions))}
	for _, v := range versions {
		out.Versions = append(out.Versions, flowrunnerapi.FlowVersion{Version: v.Version, PublishedAt: httpx.Timestamp(v.PublishedAt), NodeCount: v.Nodes})
	}
	return c.JSON(http.StatusOK, out)
}

// getFlowVersion answers the version's document as its body, byte for
// byte as it was published, so its author's layout is kept.
func (h *handlers) getFlowVersion(c echo.Context) error {
	ws, err := workspaceQuery(c)
	if err != nil {
		return err
	}
	version, err := strconv.Atoi(c.Param("version"))
	if err != nil || version < 1 {
		return errs.InvalidRequest("version must be a version number (1, 2, ...)")
	}
	doc, err := h.app.GetFlowVersion(c.Request().Context(), ws, c.Param("id"), version)
	if err != nil {
		return toHTTPError(err)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, doc)
}

func (h *handlers) listRuns(c echo.Context) error {
	ws, err := adminWorkspace(c)
	if err != nil {
		return err
	}
	q, err := parseRunQuery(c)
	if err != nil {
		return err
	}
	page, err := h.app.ListRuns(c.Request().Context(), ws, q)
	if err != nil {
		return toHTTPError(err)
	}
	out := flowrunnerapi.RunPage{Runs: make([]flowrunnerapi.RunSummary, 0, len(page.Runs)), NextBefore: httpx.OptionalTimestamp(page.NextBefore)}
	for _, r := range page.Runs {
		out.Runs = append(out.Runs, toAPIRunSummary(r))
	}
	return c.JSON(http.StatusOK, out)
}

// getRunTrace answers a run of the workspace, of any kind, in the shape
// the public run route renders.
func (h *handlers) getRunTrace(c echo.Context) error {
	ws, err := adminWorkspace(c)
	if err != nil {
		return err
	}
	t, err := h.app.GetRunTrace(c.Request().Context(), ws, c.Param("id"))
	if err != nil {
		return toHTTPError(err)
	}
	return c.JSON(http.StatusOK, toAPITrace(t))
}

// parseRunQuery reads the runs list's filters and page; anything it cannot
// read is 400 invalid_request naming the parameter.
func parseRunQuery(c echo.Context) (catalog.RunQuery, error) {
	var q catalog.RunQuery
	if err := paging.Once(c.QueryParams(), "limit", "before", "flow_id", "conversation_id", "status"); err != nil {
		return q, err
	}
	var err error
	if q.Limit, err = paging.ParseLimit(c.QueryParam("limit"), paging.DefaultLimit, paging.MaxLimit); err != nil {
		return q, err
	}
	if q.Before, err = paging.ParseBefore(c.QueryParam("before")); err != nil {
		return q, err
	}
	if s := c.QueryParam("flow_id"); s != "" {
		if !ids.Valid(s) {
			return q, errs.InvalidID("flow_id", "flow")
		}
		q.FlowID = s
	}
	if s := c.QueryParam("conversation_id"); s != "" {
		if !ids.Valid(s) {
			return q, errs.InvalidID("conversation_id", "conversation")
		}
		q.ConversationID = s
	}
	if s := c.QueryParam("status"); s != "" {
		if !slices.Contains(catalog.RunStatuses, run.Status(s)) {
			names := make([]string, len(catalog.RunStatuses))
			for i, st := range catalog.RunStatuses {
				names[i] = string(st)
			}
			return q, errs.InvalidRequest("status must be one of %s", strings.Join(names, ", "))
		}
		q.Status = run.Status(s)
	}
	return q, nil
}
