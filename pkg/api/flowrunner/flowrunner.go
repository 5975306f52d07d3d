// Package flowrunner declares the flow-runner's JSON bodies
// (docs/architecture.md "Wire types"): the /v1 flow routes it serves on its
// rpc "api" endpoint, which the gateway forwards (APIRoutes), with the
// events of a streamed run, and the operator routes on its rpc "admin"
// endpoint, which parleyctl and the console call through pkg/adminclient
// (AdminRoutes).
//
// Times are RFC 3339 strings in UTC (httpx.Timestamp). A flow document is
// not here: it is published and read back byte for byte as its author
// wrote it, and only the flow-runner parses it.
package flowrunner

import (
	"encoding/json"
	"net/http"

	"github.com/parleyhq/parley/pkg/api"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

// Flow is a flow as GET /v1/flows lists it: an active flow with an api
// trigger (docs/flows.md "Listing flows").
type Flow struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// Status is "active" or "inactive".
	Status           string `json:"status"`
	PublishedVersion int    `json:"published_version"`
	UpdatedAt        string `json:"updated_at"`
}

// FlowsResponse is GET /v1/flows's answer.
type FlowsResponse struct {
	Flows []Flow `json:"flows"`
}

// InvokeRequest is POST /v1/flows/:id/invoke's body. Input is kept raw so
// that the flow-runner measures its size and depth as sent; SessionID
// continues that session's waiting run (only input.text is read); Stream
// asks for the events of the run (an SSE answer) instead of one JSON body.
type InvokeRequest struct {
	Input     json.RawMessage `json:"input"`
	SessionID *string         `json:"session_id,omitempty"`
	Stream    bool            `json:"stream,omitempty"`
}

// InvokeResponse is the invoke's answer (200 whatever the run's status):
// SessionID only while the run waits, Error only when it failed.
type InvokeResponse struct {
	Status    string         `json:"status"`
	SessionID string         `json:"session_id,omitempty"`
	RunID     string         `json:"run_id"`
	Output    map[string]any `json:"output"`
	Messages  []Message      `json:"messages"`
	Usage     Usage          `json:"usage"`
	Error     *RunError      `json:"error,omitempty"`
}

// Message is a flow message: what a flow "sent" during the call, returned
// to the developer and never sent to a customer. Its buttons and cards are
// the ones a send takes (pkg/api/messaging). GuardBlocked is set when the
// safety guard replaced an AI node's text with the fallback text.
type Message struct {
	Type         string                `json:"type"`
	Text         string                `json:"text,omitempty"`
	QuickReplies []string              `json:"quick_replies,omitempty"`
	Buttons      []messagingapi.Button `json:"buttons,omitempty"`
	Cards        []messagingapi.Card   `json:"cards,omitempty"`
	GuardBlocked bool                  `json:"guard_blocked,omitempty"`
}

// Usage is what a call's (or, in a run list, a run's) AI nodes consumed:
// provider tokens, their cost, and the plan's units billed.
type Usage struct {
	Tokens        int     `json:"tokens"`
	CostUSD       float64 `json:"cost_usd"`
	BillableUnits int     `json:"billable_units"`
}

// RunError is a failed run's error.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// The events of a streamed invoke, in the order they come: EventRunStart;
// for each node EventNodeStart, its EventMessage events (each a Message),
// EventNodeEnd; then EventEnd.
const (
	EventRunStart  = "run_start"
	EventNodeStart = "node_start"
	EventMessage   = "message"
	EventNodeEnd   = "node_end"
	EventEnd       = "end"
)

// RunStartEvent is EventRunStart's data.
type RunStartEvent struct {
	RunID string `json:"run_id"`
}

// NodeStartEvent is EventNodeStart's data.
type NodeStartEvent struct {
	NodeID string `json:"node_id"`
	Type   string `json:"type"`
}

// NodeEndEvent is EventNodeEnd's data. It has no input or output: the
// run's trace has them.
type NodeEndEvent struct {
	NodeID string `json:"node_id"`
	Type   string `json:"type"`
	MS     int64  `json:"ms"`
	Tokens int    `json:"tokens"`
	Error  string `json:"error,omitempty"`
}

// EndEvent is EventEnd's data: the InvokeResponse without its messages,
// which came as EventMessage events.
type EndEvent struct {
	Status    string         `json:"status"`
	SessionID string         `json:"session_id,omitempty"`
	Output    map[string]any `json:"output"`
	Usage     Usage          `json:"usage"`
	Error     *RunError      `json:"error,omitempty"`
}

// Run is a run as its trace shows it; CompletedAt is left out while it
// waits.
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

// NodeRun is one node's run in a trace, with what the node was given and
// gave (their shape is the node type's).
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

// Trace is GET /v1/flows/:id/runs/:runId's answer, and the operators'
// GET /admin/workspaces/:ws/runs/:id's (a run of any kind): the run and
// its node runs, in the order they started.
type Trace struct {
	Run      Run       `json:"run"`
	NodeRuns []NodeRun `json:"node_runs"`
}

// PublishedFlow is the answer to a publish (201): the flow's id (new or
// given) and the version it now runs.
type PublishedFlow struct {
	ID               string `json:"id"`
	PublishedVersion int    `json:"published_version"`
}

// DeactivatedFlow is the answer to a deactivation.
type DeactivatedFlow struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// WorkspaceFlow is a flow as the operators' list shows it: any flow of the
// workspace, active or not, with its triggers ("api", "chat") and when it
// was created.
type WorkspaceFlow struct {
	Flow
	Triggers  []string `json:"triggers"`
	CreatedAt string   `json:"created_at"`
}

// WorkspaceFlowsResponse is GET /admin/workspaces/:ws/flows's answer,
// newest change first.
type WorkspaceFlowsResponse struct {
	Flows []WorkspaceFlow `json:"flows"`
}

// FlowVersion is one published version of a flow; NodeCount is how many
// nodes its document has.
type FlowVersion struct {
	Version     int    `json:"version"`
	PublishedAt string `json:"published_at"`
	NodeCount   int    `json:"node_count"`
}

// FlowVersions is GET /admin/flows/:id/versions's answer: the flow's
// versions, newest first, and which one is published.
type FlowVersions struct {
	FlowID           string        `json:"flow_id"`
	PublishedVersion int           `json:"published_version"`
	Versions         []FlowVersion `json:"versions"`
}

// RunSummary is a run in the operators' list of runs. DurationMS is from
// its start to its completion; it and CompletedAt are null while the run
// waits. Kind is RunKindAPI or RunKindChat; a chat run has its
// ConversationID, and one the assistant answered has no flow (FlowID ""
// and FlowVersion 0).
type RunSummary struct {
	ID             string    `json:"id"`
	Kind           string    `json:"kind"`
	FlowID         string    `json:"flow_id"`
	FlowVersion    int       `json:"flow_version"`
	ConversationID string    `json:"conversation_id,omitempty"`
	Status         string    `json:"status"`
	NodesExecuted  int       `json:"nodes_executed"`
	StartedAt      string    `json:"started_at"`
	CompletedAt    *string   `json:"completed_at"`
	DurationMS     *int64    `json:"duration_ms"`
	Usage          Usage     `json:"usage"`
	Error          *RunError `json:"error,omitempty"`
}

// RunPage is GET /admin/workspaces/:ws/runs's answer, a page of runs,
// newest first. NextBefore, passed as before, returns the next page; null
// on the last page.
type RunPage struct {
	Runs       []RunSummary `json:"runs"`
	NextBefore *string      `json:"next_before"`
}

// KnowledgeDocument is a document of a workspace's knowledge base, split
// into Passages for search.
type KnowledgeDocument struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Passages  int    `json:"passages"`
	CreatedAt string `json:"created_at"`
}

// AddKnowledgeDocumentRequest is an upload's body: the Markdown as a JSON
// string, which needs no encoding of its own and keeps any script
// readable (it must be UTF-8).
type AddKnowledgeDocumentRequest struct {
	Title    string `json:"title"`
	Markdown string `json:"markdown"`
}

// KnowledgeDocumentResponse is an upload's answer (201).
type KnowledgeDocumentResponse struct {
	Document KnowledgeDocument `json:"document"`
}

// KnowledgeDocumentsResponse is the knowledge base's list, newest first.
type KnowledgeDocumentsResponse struct {
	Documents []KnowledgeDocument `json:"documents"`
}

// DeletedDocument is the answer to a document's deletion.
type DeletedDocument struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

// APIRoutes are the /v1 routes of the flow-runner's rpc "api" endpoint,
// each as the workspace the gateway authenticated. An invoke that asks
// for a stream answers the Event* events instead of InvokeResponse.
var APIRoutes = []api.Route{
	{Method: http.MethodGet, Path: "/v1/flows", Response: FlowsResponse{}},
	{Method: http.MethodPost, Path: "/v1/flows/:id/invoke", Request: InvokeRequest{}, Response: InvokeResponse{}},
	{Method: http.MethodGet, Path: "/v1/flows/:id/runs/:runId", Response: Trace{}},
}

// AdminRoutes are the operator routes of the flow-runner's rpc "admin"
// endpoint. A publish takes the flow document as its body (flow_id in
// the query publishes a new version of that flow), and a version's read
// answers the document as it was published. The routes under
// /admin/flows/:id take the workspace_id query (optional for a
// deactivation); GET .../runs takes limit, before, flow_id,
// conversation_id and status; a document's deletion takes the optional
// workspace query. A channel's chat flow is set with a ChatFlow body, and
// read or cleared with the workspace_id query.
var AdminRoutes = []api.Route{
	{Method: http.MethodPost, Path: "/admin/workspaces/:ws/flows", Response: PublishedFlow{}},
	{Method: http.MethodGet, Path: "/admin/workspaces/:ws/flows", Response: WorkspaceFlowsResponse{}},
	{Method: http.MethodPost, Path: "/admin/flows/:id/deactivate", Response: DeactivatedFlow{}},
	{Method: http.MethodGet, Path: "/admin/flows/:id/versions", Response: FlowVersions{}},
	{Method: http.MethodGet, Path: "/admin/flows/:id/versions/:version"},
	{Method: http.MethodGet, Path: "/admin/workspaces/:ws/runs", Response: RunPage{}},
	{Method: http.MethodGet, Path: "/admin/workspaces/:ws/runs/:id", Response: Trace{}},
	{Method: http.MethodPut, Path: "/admin/channels/:channel_id/chat-flow", Request: ChatFlow{}, Response: ChatFlowAnswer{}},
	{Method: http.MethodGet, Path: "/admin/channels/:channel_id/chat-flow", Response: ChatFlowAnswer{}},
	{Method: http.MethodDelete, Path: "/admin/channels/:channel_id/chat-flow", Response: ChatFlowAnswer{}},
	{Method: http.MethodPost, Path: "/admin/workspaces/:ws/kb/documents", Request: AddKnowledgeDocumentRequest{}, Response: KnowledgeDocumentResponse{}},
	{Method: http.MethodGet, Path: "/admin/workspaces/:ws/kb/documents", Response: KnowledgeDocumentsResponse{}},
	{Method: http.MethodDelete, Path: "/admin/kb/documents/:id", Response: DeletedDocument{}},
}
