package adminclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/rpc"
)

// Flow is a flow as the flow-runner lists it.
type Flow struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	Description      string `json:"description"`
	Status           string `json:"status"`
	PublishedVersion int    `json:"published_version"`
	UpdatedAt        string `json:"updated_at"`
}

// WorkspaceFlow is a flow as the flow-runner lists it to operators: every
// flow of the workspace, active or not, with its triggers ("api", "chat")
// and when it was created.
type WorkspaceFlow struct {
	Flow
	Triggers  []string `json:"triggers"`
	CreatedAt string   `json:"created_at"`
}

// FlowVersion is one published version of a flow; NodeCount is how many
// nodes its document has.
type FlowVersion struct {
	Version     int    `json:"version"`
	PublishedAt string `json:"published_at"`
	NodeCount   int    `json:"node_count"`
}

// FlowVersions are a flow's versions, newest first, and which one is
// published.
type FlowVersions struct {
	FlowID           string        `json:"flow_id"`
	PublishedVersion int           `json:"published_version"`
	Versions         []FlowVersion `json:"versions"`
}

// RunUsage is what a run's AI nodes consumed over all its calls.
type RunUsage struct {
	Tokens        int     `json:"tokens"`
	CostUSD       float64 `json:"cost_usd"`
	BillableUnits int     `json:"billable_units"`
}

// RunSummary is a run in the operators' list of runs. DurationMS is from
// its start to its completion, nil while it waits at a question.
type RunSummary struct {
	ID            string    `json:"id"`
	FlowID        string    `json:"flow_id"`
	FlowVersion   int       `json:"flow_version"`
	Status        string    `json:"status"`
	NodesExecuted int       `json:"nodes_executed"`
	StartedAt     string    `json:"started_at"`
	CompletedAt   *string   `json:"completed_at"`
	DurationMS    *int64    `json:"duration_ms"`
	Usage         RunUsage  `json:"usage"`
	Error         *RunError `json:"error,omitempty"`
}

// RunFilter selects a page of a workspace's runs; zero fields do not
// filter. The runs are newest first: Before (an RFC 3339 time, exclusive)
// is where the page starts, the NextBefore of the page before it; Limit is
// the page size (the flow-runner's default and maximum apply).
type RunFilter struct {
	FlowID string
	Status string
	Before string
	Limit  int
}

// RunPage is a page of runs. NextBefore, given as Before, returns the
// next page; nil on the last page.
type RunPage struct {
	Runs       []RunSummary `json:"runs"`
	NextBefore *string      `json:"next_before"`
}

// PublishedFlow is the flow-runner's answer to a publish.
type PublishedFlow struct {
	ID               string `json:"id"`
	PublishedVersion int    `json:"published_version"`
}

// DeactivatedFlow is the flow-runner's answer to a deactivation.
type DeactivatedFlow struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// RunError is a failed run's or node's error.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Run is a flow run as its trace shows it.
type Run struct {
	ID            string         `json:"id"`
	FlowID        string         `json:"flow_id"`
	Status        string         `json:"status"`
	CurrentNodeID string         `json:"current_node_id"`
	NodesExecuted int            `json:"nodes_executed"`
	Vars          map[string]any `json:"vars"`
	Output        map[string]any `json:"output"`
	Error         *RunError      `json:"error,omitempty"`
	StartedAt     string         `json:"started_at"`
	CompletedAt   *string        `json:"completed_at,omitempty"`
}

// NodeRun is one node's step in a run.
type NodeRun struct {
	NodeID     string  `json:"node_id"`
	NodeType   string  `json:"node_type"`
	StartedAt  string  `json:"started_at"`
	DurationMS int64   `json:"duration_ms"`
	Input      any     `json:"input"`
	Output     any     `json:"output"`
	Error      string  `json:"error,omitempty"`
	Tokens     int     `json:"tokens"`
	CostUSD    float64 `json:"cost_usd"`
}

// Trace is a run and its nodes' steps in order.
type Trace struct {
	Run      Run       `json:"run"`
	NodeRuns []NodeRun `json:"node_runs"`
}

// ListFlows returns the workspace's active API flows, read from the
// flow-runner's API endpoint as the gateway forwards GET /v1/flows with
// the flows_api feature on: what a developer's key lists. ListAllFlows is
// the operators' list.
func (c *Client) ListFlows(ctx context.Context, workspaceID string) ([]Flow, error) {
	var out struct {
		Flows []Flow `json:"flows"`
	}
	req := &rpcv1.Request{WorkspaceId: workspaceID, Method: http.MethodGet, Path: "/v1/flows", Features: []string{FeatureFlowsAPI}}
	err := c.call.CallRaw(ctx, rpc.ServiceFlowRunner, rpc.EndpointAPI, req, &out)
	return out.Flows, err
}

// ListAllFlows returns every flow of the workspace, active or not,
// whatever its triggers, newest change first, from the flow-runner's admin
// endpoint.
func (c *Client) ListAllFlows(ctx context.Context, workspaceID string) ([]WorkspaceFlow, error) {
	var out struct {
		Flows []WorkspaceFlow `json:"flows"`
	}
	err := c.get(ctx, rpc.ServiceFlowRunner, "/admin/workspaces/"+segment(workspaceID)+"/flows", nil, &out)
	return out.Flows, err
}

// ListFlowVersions returns the versions of the workspace's flow, newest
// first; a flow of another workspace is 404 flow_not_found.
func (c *Client) ListFlowVersions(ctx context.Context, workspaceID, flowID string) (FlowVersions, error) {
	var out FlowVersions
	err := c.get(ctx, rpc.ServiceFlowRunner, "/admin/flows/"+segment(flowID)+"/versions", url.Values{"workspace_id": {workspaceID}}, &out)
	return out, err
}

// GetFlowVersion returns the document of a version of the workspace's
// flow as it was published (404 flow_version_not_found for a version the
// flow lacks).
func (c *Client) GetFlowVersion(ctx context.Context, workspaceID, flowID string, version int) ([]byte, error) {
	var out json.RawMessage
	path := "/admin/flows/" + segment(flowID) + "/versions/" + strconv.Itoa(version)
	err := c.get(ctx, rpc.ServiceFlowRunner, path, url.Values{"workspace_id": {workspaceID}}, &out)
	return out, err
}

// ListRuns returns a page of the workspace's runs, newest first; a
// FlowID of another workspace is 404 flow_not_found, a filter the
// flow-runner cannot read 400 invalid_request.
func (c *Client) ListRuns(ctx context.Context, workspaceID string, f RunFilter) (RunPage, error) {
	query := pageQuery(map[string]string{"flow_id": f.FlowID, "status": f.Status, "before": f.Before}, f.Limit)
	var out RunPage
	err := c.get(ctx, rpc.ServiceFlowRunner, "/admin/workspaces/"+segment(workspaceID)+"/runs", query, &out)
	return out, err
}

// PublishFlow publishes a flow document as a new flow, or with flowID as a
// new version of that flow. The document goes byte for byte, so the stored
// version is what its author wrote. A document the flow-runner refuses is
// 400 invalid_request whose message names the node and field.
func (c *Client) PublishFlow(ctx context.Context, workspaceID, flowID string, document []byte) (PublishedFlow, error) {
	req := &rpcv1.Request{Method: http.MethodPost, Path: "/admin/workspaces/" + segment(workspaceID) + "/flows", Body: document}
	if flowID != "" {
		req.RawQuery = url.Values{"flow_id": {flowID}}.Encode()
	}
	var out PublishedFlow
	err := c.call.CallRaw(ctx, rpc.ServiceFlowRunner, rpc.EndpointAdmin, req, &out)
	return out, err
}

// DeactivateFlow deactivates a flow: it is no longer invoked or listed.
// With workspaceID set, the flow must be that workspace's (404
// flow_not_found otherwise); empty, any flow is (a platform operator's
// parleyctl).
func (c *Client) DeactivateFlow(ctx context.Context, workspaceID, flowID string) (DeactivatedFlow, error) {
	var out DeactivatedFlow
	path := withQuery("/admin/flows/"+segment(flowID)+"/deactivate", pageQuery(map[string]string{"workspace_id": workspaceID}, 0))
	err := c.admin(ctx, rpc.ServiceFlowRunner, http.MethodPost, path, nil, &out)
	return out, err
}

// GetRunTrace returns a run of the workspace's flow with each node's step,
// read as the gateway forwards GET /v1/flows/:id/runs/:runId.
func (c *Client) GetRunTrace(ctx context.Context, workspaceID, flowID, runID string) (Trace, error) {
	req := &rpcv1.Request{WorkspaceId: workspaceID, Method: http.MethodGet,
		Path: "/v1/flows/" + segment(flowID) + "/runs/" + segment(runID), Features: []string{FeatureFlowsAPI}}
	var out Trace
	err := c.call.CallRaw(ctx, rpc.ServiceFlowRunner, rpc.EndpointAPI, req, &out)
	return out, err
}
