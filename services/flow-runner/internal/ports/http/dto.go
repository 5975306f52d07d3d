package http

import (
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/flow-runner/internal/app"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// The converters from the use cases' objects to the wire types of
// pkg/api/flowrunner, which the handlers render.

func toAPIFlow(f *catalog.Flow) flowrunnerapi.Flow {
	return flowrunnerapi.Flow{
		ID: f.ID, Name: f.Name, Description: f.Description, Status: f.Status,
		PublishedVersion: f.PublishedVersion, UpdatedAt: httpx.Timestamp(f.UpdatedAt),
	}
}

// toAPIWorkspaceFlow is a flow as the operators' list shows it: the public
// flow object with its triggers and creation time.
func toAPIWorkspaceFlow(f *catalog.Flow) flowrunnerapi.WorkspaceFlow {
	triggers := f.Triggers
	if triggers == nil {
		triggers = []string{}
	}
	return flowrunnerapi.WorkspaceFlow{Flow: toAPIFlow(f), Triggers: triggers, CreatedAt: httpx.Timestamp(f.CreatedAt)}
}

// toAPIInvokeResponse is the invoke's 200 body; session_id only while the
// run waits, error only when it failed.
func toAPIInvokeResponse(o *app.Outcome) flowrunnerapi.InvokeResponse {
	r := o.Run
	out := flowrunnerapi.InvokeResponse{
		Status: string(r.Status), RunID: r.ID, Output: r.Output, Messages: make([]flowrunnerapi.Message, 0, len(o.Messages)),
		Usage: toAPIUsage(o.Usage), Error: toAPIRunError(r.Error),
	}
	if r.Status == run.StatusWaiting {
		out.SessionID = r.SessionID
	}
	if out.Output == nil {
		out.Output = map[string]any{}
	}
	for _, m := range o.Messages {
		out.Messages = append(out.Messages, toAPIMessage(m))
	}
	return out
}

// toAPIEndEvent is a stream's end: the invoke response without its
// messages, which went as message events.
func toAPIEndEvent(r flowrunnerapi.InvokeResponse) flowrunnerapi.EndEvent {
	return flowrunnerapi.EndEvent{Status: r.Status, SessionID: r.SessionID, Output: r.Output, Usage: r.Usage, Error: r.Error}
}

func toAPIMessage(m run.Message) flowrunnerapi.Message {
	out := flowrunnerapi.Message{
		Type: m.Type, Text: m.Text, QuickReplies: m.QuickReplies, Buttons: toAPIButtons(m.Buttons), GuardBlocked: m.GuardBlocked,
	}
	for _, c := range m.Cards {
		out.Cards = append(out.Cards, messagingapi.Card{Title: c.Title, Subtitle: c.Subtitle, ImageURL: c.ImageURL, Buttons: toAPIButtons(c.Buttons)})
	}
	return out
}

func toAPIButtons(bs []run.Button) []messagingapi.Button {
	if bs == nil {
		return nil
	}
	out := make([]messagingapi.Button, len(bs))
	for i, b := range bs {
		out[i] = messagingapi.Button{Type: b.Type, Title: b.Title, URL: b.URL, Payload: b.Payload}
	}
	return out
}

func toAPIUsage(u run.Usage) flowrunnerapi.Usage {
	return flowrunnerapi.Usage{Tokens: u.Tokens, CostUSD: u.CostUSD, BillableUnits: u.BillableUnits}
}

func toAPIRunError(e *run.Error) *flowrunnerapi.RunError {
	if e == nil {
		return nil
	}
	return &flowrunnerapi.RunError{Code: e.Code, Message: e.Message}
}

func toAPITrace(t *catalog.Trace) flowrunnerapi.Trace {
	r := t.Run
	out := flowrunnerapi.Trace{
		Run: flowrunnerapi.Run{
			ID: r.ID, FlowID: r.FlowID, Status: string(r.Status), CurrentNodeID: r.CurrentNodeID,
			NodesExecuted: r.NodesExecuted, Vars: r.Vars, Output: r.Output, Error: toAPIRunError(r.Error),
			StartedAt: httpx.Timestamp(r.StartedAt), CompletedAt: httpx.OptionalTimestamp(r.CompletedAt),
		},
		NodeRuns: make([]flowrunnerapi.NodeRun, 0, len(t.NodeRuns)),
	}
	if out.Run.Vars == nil {
		out.Run.Vars = map[string]any{}
	}
	if out.Run.Output == nil {
		out.Run.Output = map[string]any{}
	}
	for _, n := range t.NodeRuns {
		out.NodeRuns = append(out.NodeRuns, flowrunnerapi.NodeRun{
			NodeID: n.NodeID, NodeType: n.NodeType, StartedAt: httpx.Timestamp(n.StartedAt), DurationMS: n.DurationMS,
			Input: n.Input, Output: n.Output, Error: n.Error, Tokens: n.Tokens, CostUSD: n.CostUSD,
		})
	}
	return out
}

// toAPIRunSummary is a run in the operators' list; duration_ms is from its
// start to its completion, null while it waits.
func toAPIRunSummary(r catalog.RunSummary) flowrunnerapi.RunSummary {
	out := flowrunnerapi.RunSummary{
		ID: r.ID, Kind: r.Kind, FlowID: r.FlowID, FlowVersion: r.Version, ConversationID: r.ConversationID,
		Status: string(r.Status), NodesExecuted: r.NodesExecuted,
		StartedAt: httpx.Timestamp(r.StartedAt), CompletedAt: httpx.OptionalTimestamp(r.CompletedAt),
		Usage: toAPIUsage(r.Usage), Error: toAPIRunError(r.Error),
	}
	if r.CompletedAt != nil {
		ms := r.CompletedAt.Sub(r.StartedAt).Milliseconds()
		out.DurationMS = &ms
	}
	return out
}

func toAPIKnowledgeDocument(d *catalog.KnowledgeDocument) flowrunnerapi.KnowledgeDocument {
	return flowrunnerapi.KnowledgeDocument{ID: d.ID, Title: d.Title, Passages: d.Passages, CreatedAt: httpx.Timestamp(d.CreatedAt)}
}
