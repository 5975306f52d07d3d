package adminclient

import (
	"context"
	"net/http"
	"net/url"

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
// flow-runner's API endpoint as the gateway forwards GET /v1/flows (the
// flow-runner's admin routes list none) with the flows_api feature on.
func (c *Client) ListFlows(ctx context.Context, workspaceID string) ([]Flow, error) {
	var out struct {
		Flows []Flow `json:"flows"`
	}
	req := &rpcv1.Request{WorkspaceId: workspaceID, Method: http.MethodGet, Path: "/v1/flows", Features: []string{FeatureFlowsAPI}}
	err := c.call.CallRaw(ctx, rpc.ServiceFlowRunner, rpc.EndpointAPI, req, &out)
	return out.Flows, err
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
func (c *Client) DeactivateFlow(ctx context.Context, flowID string) (DeactivatedFlow, error) {
	var out DeactivatedFlow
	err := c.admin(ctx, rpc.ServiceFlowRunner, http.MethodPost, "/admin/flows/"+segment(flowID)+"/deactivate", nil, &out)
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
