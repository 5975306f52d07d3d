package adminclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/rpc"
)

// RunFilter selects a page of a workspace's runs; zero fields do not
// filter. The runs are newest first: Before (an RFC 3339 time, exclusive)
// is where the page starts, the NextBefore of the page before it; Limit is
// the page size (the flow-runner's default and maximum apply).
type RunFilter struct {
	FlowID string
	// ConversationID keeps the chat runs of one conversation.
	ConversationID string
	Status         string
	Before         string
	Limit          int
}

// ListFlows returns the workspace's active API flows, read from the
// flow-runner's API endpoint as the gateway forwards GET /v1/flows with
// the flows_api feature on: what a developer's key lists. ListAllFlows is
// the operators' list.
func (c *Client) ListFlows(ctx context.Context, workspaceID string) ([]flowrunnerapi.Flow, error) {
	var out flowrunnerapi.FlowsResponse
	req := &rpcv1.Request{WorkspaceId: workspaceID, Method: http.MethodGet, Path: "/v1/flows", Features: []string{gatewayapi.FeatureFlowsAPI}}
	err := c.call.CallRaw(ctx, rpc.ServiceFlowRunner, rpc.EndpointAPI, req, &out)
	return out.Flows, err
}

// ListAllFlows returns every flow of the workspace, active or not,
// whatever its triggers, newest change first, from the flow-runner's admin
// endpoint.
func (c *Client) ListAllFlows(ctx context.Context, workspaceID string) ([]flowrunnerapi.WorkspaceFlow, error) {
	var out flowrunnerapi.WorkspaceFlowsResponse
	err := c.get(ctx, rpc.ServiceFlowRunner, "/admin/workspaces/"+segment(workspaceID)+"/flows", nil, &out)
	return out.Flows, err
}

// ListFlowVersions returns the versions of the workspace's flow, newest
// first; a flow of another workspace is 404 flow_not_found.
func (c *Client) ListFlowVersions(ctx context.Context, workspaceID, flowID string) (flowrunnerapi.FlowVersions, error) {
	var out flowrunnerapi.FlowVersions
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
func (c *Client) ListRuns(ctx context.Context, workspaceID string, f RunFilter) (flowrunnerapi.RunPage, error) {
	query := pageQuery(map[string]string{"flow_id": f.FlowID, "conversation_id": f.ConversationID, "status": f.Status, "before": f.Before}, f.Limit)
	var out flowrunnerapi.RunPage
	err := c.get(ctx, rpc.ServiceFlowRunner, "/admin/workspaces/"+segment(workspaceID)+"/runs", query, &out)
	return out, err
}

// PublishFlow publishes a flow document as a new flow, or with flowID as a
// new version of that flow. The document goes byte for byte, so the stored
// version is what its author wrote. A document the flow-runner refuses is
// 400 invalid_request whose message names the node and field.
func (c *Client) PublishFlow(ctx context.Context, workspaceID, flowID string, document []byte) (flowrunnerapi.PublishedFlow, error) {
	req := &rpcv1.Request{Method: http.MethodPost, Path: "/admin/workspaces/" + segment(workspaceID) + "/flows", Body: document}
	if flowID != "" {
		req.RawQuery = url.Values{"flow_id": {flowID}}.Encode()
	}
	var out flowrunnerapi.PublishedFlow
	err := c.call.CallRaw(ctx, rpc.ServiceFlowRunner, rpc.EndpointAdmin, req, &out)
	return out, err
}

// DeactivateFlow deactivates a flow: it is no longer invoked or listed.
// With workspaceID set, the flow must be that workspace's (404
// flow_not_found otherwise); empty, any flow is (a platform operator's
// parleyctl).
func (c *Client) DeactivateFlow(ctx context.Context, workspaceID, flowID string) (flowrunnerapi.DeactivatedFlow, error) {
	var out flowrunnerapi.DeactivatedFlow
	path := withQuery("/admin/flows/"+segment(flowID)+"/deactivate", pageQuery(map[string]string{"workspace_id": workspaceID}, 0))
	err := c.admin(ctx, rpc.ServiceFlowRunner, http.MethodPost, path, nil, &out)
	return out, err
}

// RunTrace returns a run of the workspace with each node's step, from the
// flow-runner's admin endpoint: a run of any kind, an API run or a chat
// run (which GetRunTrace, the Developer API's read, never finds). A run
// of another workspace is 404 run_not_found.
func (c *Client) RunTrace(ctx context.Context, workspaceID, runID string) (flowrunnerapi.Trace, error) {
	var out flowrunnerapi.Trace
	err := c.get(ctx, rpc.ServiceFlowRunner, "/admin/workspaces/"+segment(workspaceID)+"/runs/"+segment(runID), nil, &out)
	return out, err
}

// SetChatFlow makes flowID the chat flow of the workspace's channel: the
// flow that answers its customers in place of the assistant. A flow not
// of the workspace is 404 flow_not_found; one inactive or without the
// chat trigger 422 flow_not_for_chat. The flow-runner does not know
// channels: the caller checks the channel is the workspace's (Channel).
func (c *Client) SetChatFlow(ctx context.Context, workspaceID, channelID, flowID string) (flowrunnerapi.ChatFlow, error) {
	var out flowrunnerapi.ChatFlowAnswer
	body := flowrunnerapi.ChatFlow{WorkspaceID: workspaceID, ChannelID: channelID, FlowID: flowID}
	err := c.admin(ctx, rpc.ServiceFlowRunner, http.MethodPut, chatFlowPath(channelID), body, &out)
	return out.ChatFlow, err
}

// ChatFlow returns the flow that answers the workspace's channel now:
// FlowID "" when it has none, or its flow was deactivated or lost the
// chat trigger, and the assistant answers.
func (c *Client) ChatFlow(ctx context.Context, workspaceID, channelID string) (flowrunnerapi.ChatFlow, error) {
	var out flowrunnerapi.ChatFlowAnswer
	err := c.get(ctx, rpc.ServiceFlowRunner, chatFlowPath(channelID), url.Values{"workspace_id": {workspaceID}}, &out)
	return out.ChatFlow, err
}

// ClearChatFlow removes the workspace's channel's chat flow: the
// assistant answers it.
func (c *Client) ClearChatFlow(ctx context.Context, workspaceID, channelID string) (flowrunnerapi.ChatFlow, error) {
	var out flowrunnerapi.ChatFlowAnswer
	path := withQuery(chatFlowPath(channelID), url.Values{"workspace_id": {workspaceID}})
	err := c.admin(ctx, rpc.ServiceFlowRunner, http.MethodDelete, path, nil, &out)
	return out.ChatFlow, err
}

func chatFlowPath(channelID string) string {
	return "/admin/channels/" + segment(channelID) + "/chat-flow"
}

// GetRunTrace returns a run of the workspace's flow with each node's step,
// read as the gateway forwards GET /v1/flows/:id/runs/:runId.
func (c *Client) GetRunTrace(ctx context.Context, workspaceID, flowID, runID string) (flowrunnerapi.Trace, error) {
	req := &rpcv1.Request{WorkspaceId: workspaceID, Method: http.MethodGet,
		Path: "/v1/flows/" + segment(flowID) + "/runs/" + segment(runID), Features: []string{gatewayapi.FeatureFlowsAPI}}
	var out flowrunnerapi.Trace
	err := c.call.CallRaw(ctx, rpc.ServiceFlowRunner, rpc.EndpointAPI, req, &out)
	return out, err
}
