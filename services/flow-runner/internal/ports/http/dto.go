package http

import (
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/flow-runner/internal/app"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// flowDTO is the specification's flow object.
type flowDTO struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	Description      string `json:"description"`
	Status           string `json:"status"`
	PublishedVersion int    `json:"published_version"`
	UpdatedAt        string `json:"updated_at"`
}

type flowsResponse struct {
	Flows []flowDTO `json:"flows"`
}

func toFlowDTO(f *catalog.Flow) flowDTO {
	return flowDTO{
		ID: f.ID, Name: f.Name, Description: f.Description, Status: f.Status,
		PublishedVersion: f.PublishedVersion, UpdatedAt: httpx.Timestamp(f.UpdatedAt),
	}
}

type publishedResponse struct {
	ID               string `json:"id"`
	PublishedVersion int    `json:"published_version"`
}

type deactivatedResponse struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// invokeResponse is the invoke's 200 body; session_id only while the run
// waits, error only when it failed.
type invokeResponse struct {
	Status    string         `json:"status"`
	SessionID string         `json:"session_id,omitempty"`
	RunID     string         `json:"run_id"`
	Output    map[string]any `json:"output"`
	Messages  []run.Message  `json:"messages"`
	Usage     run.Usage      `json:"usage"`
	Error     *run.Error     `json:"error,omitempty"`
}

func toInvokeResponse(o *app.Outcome) invokeResponse {
	r := o.Run
	out := invokeResponse{
		Status: string(r.Status), RunID: r.ID, Output: r.Output, Messages: o.Messages, Usage: o.Usage, Error: r.Error,
	}
	if r.Status == run.StatusWaiting {
		out.SessionID = r.SessionID
	}
	if out.Output == nil {
		out.Output = map[string]any{}
	}
	if out.Messages == nil {
		out.Messages = []run.Message{}
	}
	return out
}

type runDTO struct {
	ID            string         `json:"id"`
	FlowID        string         `json:"flow_id"`
	Status        string         `json:"status"`
	CurrentNodeID string         `json:"current_node_id"`
	NodesExecuted int            `json:"nodes_executed"`
	Vars          map[string]any `json:"vars"`
	Output        map[string]any `json:"output"`
	Error         *run.Error     `json:"error,omitempty"`
	StartedAt     string         `json:"started_at"`
	CompletedAt   *string        `json:"completed_at,omitempty"`
}

type nodeRunDTO struct {
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

type traceResponse struct {
	Run      runDTO       `json:"run"`
	NodeRuns []nodeRunDTO `json:"node_runs"`
}

func toTraceDTO(t *catalog.Trace) traceResponse {
	r := t.Run
	out := traceResponse{
		Run: runDTO{
			ID: r.ID, FlowID: r.FlowID, Status: string(r.Status), CurrentNodeID: r.CurrentNodeID,
			NodesExecuted: r.NodesExecuted, Vars: r.Vars, Output: r.Output, Error: r.Error,
			StartedAt: httpx.Timestamp(r.StartedAt), CompletedAt: httpx.OptionalTimestamp(r.CompletedAt),
		},
		NodeRuns: make([]nodeRunDTO, 0, len(t.NodeRuns)),
	}
	if out.Run.Vars == nil {
		out.Run.Vars = map[string]any{}
	}
	if out.Run.Output == nil {
		out.Run.Output = map[string]any{}
	}
	for _, n := range t.NodeRuns {
		out.NodeRuns = append(out.NodeRuns, nodeRunDTO{
			NodeID: n.NodeID, NodeType: n.NodeType, StartedAt: httpx.Timestamp(n.StartedAt), DurationMS: n.DurationMS,
			Input: n.Input, Output: n.Output, Error: n.Error, Tokens: n.Tokens, CostUSD: n.CostUSD,
		})
	}
	return out
}

// The events of a streamed run (SSE), in the order they come: run_start;
// for each node node_start, its messages (the flow message objects),
// node_end; then end.
type runStartEvent struct {
	RunID string `json:"run_id"`
}

type nodeStartEvent struct {
	NodeID string `json:"node_id"`
	Type   string `json:"type"`
}

// nodeEndEvent has no input or output: the trace has them.
type nodeEndEvent struct {
	NodeID string `json:"node_id"`
	Type   string `json:"type"`
	MS     int64  `json:"ms"`
	Tokens int    `json:"tokens"`
	Error  string `json:"error,omitempty"`
}

// endEvent is the invoke response without its messages, which went as
// message events.
type endEvent struct {
	Status    string         `json:"status"`
	SessionID string         `json:"session_id,omitempty"`
	Output    map[string]any `json:"output"`
	Usage     run.Usage      `json:"usage"`
	Error     *run.Error     `json:"error,omitempty"`
}

func toEndEvent(r invokeResponse) endEvent {
	return endEvent{Status: r.Status, SessionID: r.SessionID, Output: r.Output, Usage: r.Usage, Error: r.Error}
}

// adminFlowDTO is a flow as the operators' list shows it: the public flow
// object with its triggers and creation time.
type adminFlowDTO struct {
	flowDTO
	Triggers  []string `json:"triggers"`
	CreatedAt string   `json:"created_at"`
}

type adminFlowsResponse struct {
	Flows []adminFlowDTO `json:"flows"`
}

func toAdminFlowDTO(f *catalog.Flow) adminFlowDTO {
	triggers := f.Triggers
	if triggers == nil {
		triggers = []string{}
	}
	return adminFlowDTO{flowDTO: toFlowDTO(f), Triggers: triggers, CreatedAt: httpx.Timestamp(f.CreatedAt)}
}

type versionDTO struct {
	Version     int    `json:"version"`
	PublishedAt string `json:"published_at"`
	NodeCount   int    `json:"node_count"`
}

type versionsResponse struct {
	FlowID           string       `json:"flow_id"`
	PublishedVersion int          `json:"published_version"`
	Versions         []versionDTO `json:"versions"`
}

// runSummaryDTO is a run in the operators' list. duration_ms is from its
// start to its completion, null while it waits.
type runSummaryDTO struct {
	ID            string     `json:"id"`
	FlowID        string     `json:"flow_id"`
	FlowVersion   int        `json:"flow_version"`
	Status        string     `json:"status"`
	NodesExecuted int        `json:"nodes_executed"`
	StartedAt     string     `json:"started_at"`
	CompletedAt   *string    `json:"completed_at"`
	DurationMS    *int64     `json:"duration_ms"`
	Usage         run.Usage  `json:"usage"`
	Error         *run.Error `json:"error,omitempty"`
}

type runsResponse struct {
	Runs       []runSummaryDTO `json:"runs"`
	NextBefore *string         `json:"next_before"`
}

func toRunSummaryDTO(r catalog.RunSummary) runSummaryDTO {
	out := runSummaryDTO{
		ID: r.ID, FlowID: r.FlowID, FlowVersion: r.Version, Status: string(r.Status), NodesExecuted: r.NodesExecuted,
		StartedAt: httpx.Timestamp(r.StartedAt), CompletedAt: httpx.OptionalTimestamp(r.CompletedAt), Usage: r.Usage, Error: r.Error,
	}
	if r.CompletedAt != nil {
		ms := r.CompletedAt.Sub(r.StartedAt).Milliseconds()
		out.DurationMS = &ms
	}
	return out
}
