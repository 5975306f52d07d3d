package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"

	"github.com/parleyhq/parley/pkg/adminclient"
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
)

// FlowRunner is the flow-runner's flow, run and knowledge-base calls;
// *adminclient.Client implements it.
type FlowRunner interface {
	ListAllFlows(ctx context.Context, workspaceID string) ([]flowrunnerapi.WorkspaceFlow, error)
	ListFlowVersions(ctx context.Context, workspaceID, flowID string) (flowrunnerapi.FlowVersions, error)
	GetFlowVersion(ctx context.Context, workspaceID, flowID string, version int) ([]byte, error)
	ListRuns(ctx context.Context, workspaceID string, f adminclient.RunFilter) (flowrunnerapi.RunPage, error)
	PublishFlow(ctx context.Context, workspaceID, flowID string, document []byte) (flowrunnerapi.PublishedFlow, error)
	DeactivateFlow(ctx context.Context, workspaceID, flowID string) (flowrunnerapi.DeactivatedFlow, error)
	GetRunTrace(ctx context.Context, workspaceID, flowID, runID string) (flowrunnerapi.Trace, error)
	AddDocument(ctx context.Context, workspaceID, title, markdown string) (flowrunnerapi.KnowledgeDocument, error)
	ListDocuments(ctx context.Context, workspaceID string) ([]flowrunnerapi.KnowledgeDocument, error)
	DeleteDocument(ctx context.Context, documentID, workspaceID string) (flowrunnerapi.DeletedDocument, error)
}

// ErrFlowNotFound is a flow the workspace does not have: unknown, or
// another workspace's.
var ErrFlowNotFound = errors.New("no such flow")

// ErrVersionNotFound is a version the flow does not have.
var ErrVersionNotFound = errors.New("no such version of the flow")

// Flow-runner codes the use cases tell apart.
const (
	codeFlowNotFound    = "flow_not_found"
	codeVersionNotFound = "flow_version_not_found"
)

// Flows lists every flow of the workspace, active or not, whatever its
// triggers, newest change first.
func (a *App) Flows(ctx context.Context, op operator.Operator, workspaceID string) ([]flowrunnerapi.WorkspaceFlow, error) {
	if err := visible(op, workspaceID); err != nil {
		return nil, err
	}
	flows, err := a.flows.ListAllFlows(ctx, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list flows: %w", err)
	}
	return flows, nil
}

// Flow returns one of the workspace's flows, active or not. The
// flow-runner has no route for one flow, so it is found in the list.
func (a *App) Flow(ctx context.Context, op operator.Operator, workspaceID, flowID string) (flowrunnerapi.WorkspaceFlow, error) {
	flows, err := a.Flows(ctx, op, workspaceID)
	if err != nil {
		return flowrunnerapi.WorkspaceFlow{}, err
	}
	for _, f := range flows {
		if f.ID == flowID {
			return f, nil
		}
	}
	return flowrunnerapi.WorkspaceFlow{}, ErrFlowNotFound
}

// FlowVersions returns the versions of the workspace's flow, newest first.
func (a *App) FlowVersions(ctx context.Context, op operator.Operator, workspaceID, flowID string) (flowrunnerapi.FlowVersions, error) {
	if err := visible(op, workspaceID); err != nil {
		return flowrunnerapi.FlowVersions{}, err
	}
	v, err := a.flows.ListFlowVersions(ctx, workspaceID, flowID)
	if err != nil {
		return flowrunnerapi.FlowVersions{}, flowRunnerError("list versions of flow "+flowID, err)
	}
	return v, nil
}

// FlowVersion returns the document of a version of the workspace's flow as
// it was published.
func (a *App) FlowVersion(ctx context.Context, op operator.Operator, workspaceID, flowID string, version int) ([]byte, error) {
	if err := visible(op, workspaceID); err != nil {
		return nil, err
	}
	doc, err := a.flows.GetFlowVersion(ctx, workspaceID, flowID, version)
	if err != nil {
		return nil, flowRunnerError(fmt.Sprintf("get version %d of flow %s", version, flowID), err)
	}
	return doc, nil
}

// Runs returns a page of the workspace's runs, newest first, as f selects.
func (a *App) Runs(ctx context.Context, op operator.Operator, workspaceID string, f adminclient.RunFilter) (flowrunnerapi.RunPage, error) {
	if err := visible(op, workspaceID); err != nil {
		return flowrunnerapi.RunPage{}, err
	}
	page, err := a.flows.ListRuns(ctx, workspaceID, f)
	if err != nil {
		return flowrunnerapi.RunPage{}, flowRunnerError("list runs", err)
	}
	return page, nil
}

// flowRunnerError names the flow-runner's not-found answers as the use
// cases' errors, and wraps the rest with what was being done.
func flowRunnerError(doing string, err error) error {
	if e, ok := adminclient.AsError(err); ok && e.Status == http.StatusNotFound {
		switch e.Code {
		case codeFlowNotFound:
			return ErrFlowNotFound
		case codeVersionNotFound:
			return ErrVersionNotFound
		}
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// PublishFlow publishes document as a new flow of the workspace, or with
// flowID as a new version of that flow. A document the flow-runner refuses
// is a *FlowRefusedError saying which node and field. formID is the
// publish form's: posted again, it publishes nothing (once), and the
// repeat names the flow published.
func (a *App) PublishFlow(ctx context.Context, op operator.Operator, workspaceID, flowID, formID string, document []byte) (flowrunnerapi.PublishedFlow, error) {
	if err := visible(op, workspaceID); err != nil {
		return flowrunnerapi.PublishedFlow{}, err
	}
	input := struct {
		FlowID   string `json:"flow_id"`
		Document []byte `json:"document"`
	}{flowID, document}
	return once(ctx, a, workspaceID, formID, FormPublishFlow, input, func() (flowrunnerapi.PublishedFlow, error) {
		return a.publishFlow(ctx, workspaceID, flowID, document)
	}, func(p flowrunnerapi.PublishedFlow) string { return p.ID })
}

// publishFlow is PublishFlow's call to the flow-runner.
func (a *App) publishFlow(ctx context.Context, workspaceID, flowID string, document []byte) (flowrunnerapi.PublishedFlow, error) {
	published, err := written(a.flows.PublishFlow(ctx, workspaceID, flowID, document))
	if e, ok := adminclient.AsError(err); ok && e.Status == http.StatusBadRequest && e.Code == errs.CodeInvalidRequest {
		return flowrunnerapi.PublishedFlow{}, &FlowRefusedError{Problem: FlowProblemOf(e)}
	}
	if e, ok := adminclient.AsError(err); ok && e.Status == http.StatusNotFound && flowID != "" {
		// The flow-runner publishes a version only to the workspace's own
		// flow; any other is flow_not_found.
		return flowrunnerapi.PublishedFlow{}, ErrFlowNotFound
	}
	if err != nil {
		return flowrunnerapi.PublishedFlow{}, fmt.Errorf("publish flow: %w", err)
	}
	return published, nil
}

// DeactivateFlow deactivates one of the workspace's flows. The flow is
// first found in the workspace's list, so another workspace's flow id never
// reaches the flow-runner's write route at all; the flow-runner's own
// workspace_id check is the second line of defence.
func (a *App) DeactivateFlow(ctx context.Context, op operator.Operator, workspaceID, flowID string) error {
	f, err := a.Flow(ctx, op, workspaceID, flowID)
	if err != nil {
		return err
	}
	if _, err := a.flows.DeactivateFlow(ctx, workspaceID, f.ID); err != nil {
		return fmt.Errorf("deactivate flow: %w", err)
	}
	return nil
}

// RunTrace returns a run of the workspace's flow with its nodes' steps.
func (a *App) RunTrace(ctx context.Context, op operator.Operator, workspaceID, flowID, runID string) (flowrunnerapi.Trace, error) {
	if err := visible(op, workspaceID); err != nil {
		return flowrunnerapi.Trace{}, err
	}
	t, err := a.flows.GetRunTrace(ctx, workspaceID, flowID, runID)
	if err != nil {
		return flowrunnerapi.Trace{}, fmt.Errorf("get run %s: %w", runID, err)
	}
	return t, nil
}

// FlowProblem is what the flow-runner said was wrong with a document: the
// node (by id, or by its place in "nodes" when its id was the problem),
// the field, and why. NodeIndex is -1 when no place was named.
type FlowProblem struct {
	NodeID    string
	NodeIndex int
	Field     string
	Reason    string
}

// FlowRefusedError is a flow document the flow-runner refused.
type FlowRefusedError struct {
	Problem FlowProblem
}

func (e *FlowRefusedError) Error() string {
	return "flow refused: " + e.Problem.Reason
}

// nodeIndexField is a field naming a node by its place: "nodes[3]",
// "nodes[3].id".
var nodeIndexField = regexp.MustCompile(`^nodes\[(\d+)\]`)

// FlowProblemOf reads the flow-runner's refusal of a document from the
// fields it sends beside its message: node_id and field when the problem
// has them, and the reason (the message itself if an older flow-runner
// sent no reason).
func FlowProblemOf(e *adminclient.Error) FlowProblem {
	p := FlowProblem{NodeIndex: -1, Reason: e.Message}
	p.NodeID, _ = e.Extra["node_id"].(string)
	p.Field, _ = e.Extra["field"].(string)
	if reason, ok := e.Extra["reason"].(string); ok {
		p.Reason = reason
	}
	if m := nodeIndexField.FindStringSubmatch(p.Field); m != nil {
		if i, err := strconv.Atoi(m[1]); err == nil {
			p.NodeIndex = i
		}
	}
	return p
}

// OutlinedNode is one entry of a flow document's "nodes" as submitted.
type OutlinedNode struct {
	Index int
	ID    string
	Type  string
}

// OutlineFlow lists the nodes of a submitted flow document, in order, as
// far as it can be read: nil when it is not a JSON object with a "nodes"
// array. Entries that are not objects, or lack a string id or type, are
// listed with those left empty, so indexes stay the document's.
func OutlineFlow(document []byte) []OutlinedNode {
	var doc struct {
		Nodes []json.RawMessage `json:"nodes"`
	}
	if err := json.Unmarshal(document, &doc); err != nil {
		return nil
	}
	out := make([]OutlinedNode, 0, len(doc.Nodes))
	for i, raw := range doc.Nodes {
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(raw, &fields)
		out = append(out, OutlinedNode{Index: i, ID: stringField(fields, "id"), Type: stringField(fields, "type")})
	}
	return out
}

func stringField(fields map[string]json.RawMessage, name string) string {
	var s string
	if raw, ok := fields[name]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// Names reports whether the problem is about node n.
func (p FlowProblem) Names(n OutlinedNode) bool {
	if p.NodeIndex >= 0 {
		return p.NodeIndex == n.Index
	}
	return p.NodeID != "" && p.NodeID == n.ID
}
