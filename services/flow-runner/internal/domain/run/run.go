// Package run executes parsed flow definitions for headless (API) runs
// and for chat runs (chat.go, chat_nodes.go): an invoke starts a run, a
// continue answers its waiting question (or wakes a chat run's delay). The engine
// is pure: it reaches the outside only through the ports declared here
// (HTTPCaller, Flows, Scripts), reads time from an injected clock, and
// reports progress to an Observer. What goes wrong inside a run (a node
// failure, the run budget, a missing module) is part of the Result, never a
// Go error; Go errors are kept for calls that could not start at all.
//
// The AI nodes (llm, intent, extract) call the LLM provider through the LLM
// port, bill one of the plan's units each when they succeed (Quota), and
// llm's sent text passes the safety guard (Guard), whose fallback then
// stands for blocked text everywhere the node hands it on (its message,
// variable and trace); knowledge searches the workspace's knowledge base
// (KnowledgeBase). See ai.go.
package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/pkg/bytesize"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
)

// Status is a run's state.
type Status string

// Run states. running is only seen while the engine works.
const (
	StatusRunning   Status = "running"
	StatusWaiting   Status = "waiting"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
)

// In-run error codes (HTTP 200 with status failed).
const (
	CodeNodeFailed     = "node_failed"
	CodeBudgetExceeded = "run_budget_exceeded"
	CodeModuleInactive = "module_inactive"
	CodeQuotaExceeded  = "quota_exceeded"
)

// NodeErrScriptModuleInactive is the node error of a script node run without
// the flow_script module; the run's error is then module_inactive.
const NodeErrScriptModuleInactive = "flow_script_module_inactive"

// NodeErrAIModuleInactive is the node error of an AI node run without the
// flow_ai module; the run's error is then module_inactive.
const NodeErrAIModuleInactive = "flow_ai_module_inactive"

// MaxCallDepth is how deeply call_flow may nest: a flow called from a flow
// called from a flow called by the run is depth 3, the deepest allowed.
const MaxCallDepth = 3

// MaxVarsBytes bounds the run's variables, encoded as JSON, so that a stored
// run stays small whatever its loops write.
const MaxVarsBytes = 4 << 20

// MaxErrorBytes bounds the text of a run's error and of a node run's: an
// error may quote what the flow built (a URL an http node could not
// reach, a script's exception), and a loop of them would otherwise pile
// it up in the trace.
const MaxErrorBytes = 1 << 10

// Truncated is what a trace records instead of a node's input or output
// that would take the run's trace past its budget: the size it had, as
// JSON, so that the trace shows something was there.
func Truncated(bytes int) map[string]any {
	return map[string]any{"truncated": true, "bytes": float64(bytes)}
}

// Error is a failed run's reason.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Usage is what a run's AI nodes consumed, over all its calls: provider
// tokens and their cost, and the plan's units billed (one per successful
// llm, intent or extract node).
type Usage struct {
	Tokens        int     `json:"tokens"`
	CostUSD       float64 `json:"cost_usd"`
	BillableUnits int     `json:"billable_units"`
}

// Message is a flow message: what a send_message or question "sends". A
// headless run's are returned to the developer and never sent to a
// customer; a chat run's are also its call's ActionSend, which its caller
// sends to the customer.
type Message struct {
	Type         string   `json:"type"`
	Text         string   `json:"text,omitempty"`
	QuickReplies []string `json:"quick_replies,omitempty"`
	Buttons      []Button `json:"buttons,omitempty"`
	Cards        []Card   `json:"cards,omitempty"`
	GuardBlocked bool     `json:"guard_blocked,omitempty"`
}

// Button is a rendered message or card button.
type Button struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	URL     string `json:"url,omitempty"`
	Payload string `json:"payload,omitempty"`
}

// Card is a rendered carousel element.
type Card struct {
	Title    string   `json:"title"`
	Subtitle string   `json:"subtitle,omitempty"`
	ImageURL string   `json:"image_url,omitempty"`
	Buttons  []Button `json:"buttons,omitempty"`
}

// Run is one run of a flow version, as stored between calls.
type Run struct {
	ID          string
	FlowID      string
	Version     int
	WorkspaceID string
	Status      Status
	// CurrentNodeID is the node being run, or the question a waiting run
	// waits at, or the node the run ended at.
	CurrentNodeID string
	// NodesExecuted counts node runs over the whole run (every call, loop
	// iteration and called flow); the node budget applies to it.
	NodesExecuted int
	// Vars are the flow's variables; Vars["input"] is the first call's input.
	Vars map[string]any
	// Output is the end node's output once completed, else {}.
	Output      map[string]any
	Error       *Error
	StartedAt   time.Time
	CompletedAt *time.Time
	// Messages are every message of the run, over all its calls.
	Messages  []Message
	Usage     Usage
	SessionID string
	// Depth is 0 for a run invoked over the API; called flows run inside
	// their caller's run, counted from it.
	Depth int
	// Chat is the conversation of a chat run, nil for a headless run.
	Chat *Chat
	// WakeAt is when a chat run waiting at a delay node goes on; nil
	// while it waits at a question, or does not wait.
	WakeAt *time.Time
	// TraceBytes is what its node runs' recorded inputs and outputs take,
	// as JSON, over every call so far: a continue's store says what the
	// earlier calls took.
	TraceBytes int
}

// NodeRun is one node's run in the trace. A node stopped by the budget has
// an Error and DurationMS 0: it did not run. Input and Output are kept
// whole while the run's trace, with them, stays within Budget.Output
// (counted in Run.TraceBytes); past that, one is recorded as
// Truncated(its size). Error is cut at MaxErrorBytes.
type NodeRun struct {
	NodeID     string
	NodeType   string
	StartedAt  time.Time
	DurationMS int64
	Input      any
	Output     any
	Error      string
	Tokens     int
	CostUSD    float64
}

// AnswerTooLarge fails the call's run because its answer, of size bytes,
// is over max, the most one reply carries: the caller could never be told
// it. The call's messages and the output go, so that the run as stored is
// what the caller is told instead: failed, run_budget_exceeded.
func (res *Result) AnswerTooLarge(size, max int, now time.Time) {
	r := res.Run
	r.Messages = r.Messages[:len(r.Messages)-len(res.Messages)]
	res.Messages = nil
	// The messages are not sent either: a chat run's call keeps only the
	// actions that are not sends.
	if res.Actions != nil {
		kept := []Action{}
		for _, a := range res.Actions {
			if a.Kind != ActionSend {
				kept = append(kept, a)
			}
		}
		res.Actions = kept
	}
	r.Status, r.Output = StatusFailed, map[string]any{}
	r.Error = &Error{Code: CodeBudgetExceeded, Message: fmt.Sprintf(
		"the run's answer of %d bytes would pass %s, the most one reply carries", size, bytesize.Size(max))}
	if r.CompletedAt == nil {
		r.CompletedAt = &now
	}
}

// Result is what one invoke or continue produced.
type Result struct {
	// Run is the run after the call (the same pointer a continue was given).
	Run *Run
	// NodeRuns are this call's node runs, in the order they started.
	NodeRuns []NodeRun
	// Messages are this call's messages: the response's messages[].
	Messages []Message
	// Usage is what this call's AI nodes consumed (Run.Usage sums every
	// call's).
	Usage Usage
	// Actions are what a chat run's call does to its conversation, in
	// order; nil for a headless run.
	Actions []Action
	// Unavailable, when set, is why the run failed without any fault of
	// its flow: a port of the platform's own could not be reached
	// (ErrQuotaUnavailable). A caller that can make the whole call again
	// later (a chat turn) does so rather than keep the failure.
	Unavailable error
}

// HTTPRequest is what an http node asks for. Body is nil without one.
type HTTPRequest struct {
	Method  string
	URL     string
	Headers map[string]string
	Body    []byte
	Timeout time.Duration
}

// HTTPResponse is a completed exchange, whatever its status.
type HTTPResponse struct {
	Status  int
	Headers map[string]string
	Body    []byte
}

// HTTPCaller makes an http node's request. Implementations reach only what
// the platform allows (public https unless told otherwise), follow no
// redirects, honour ctx and Timeout, and read at most MaxResponseBytes of
// the body (a longer one is an error). A returned error is a transport
// failure; any status is a response.
type HTTPCaller interface {
	Call(ctx context.Context, req HTTPRequest) (HTTPResponse, error)
}

// MaxResponseBytes bounds an http node's response body.
const MaxResponseBytes = 1 << 20

// ErrFlowNotFound is what Flows.Load returns for a flow that is not in the
// workspace, not active, or has no published version.
var ErrFlowNotFound = errors.New("flow not found")

// Flows loads the published version of a call_flow target.
type Flows interface {
	// Load returns the parsed published version of an active flow of the
	// workspace, or an error wrapping ErrFlowNotFound.
	Load(ctx context.Context, workspaceID, flowID string) (*flow.Definition, error)
}

// Scripts runs a script node's code: a JavaScript function body with vars
// readable, no I/O, stopped at limit (or ctx), bounded in what it allocates.
// It returns the function's value as a JSON tree.
type Scripts interface {
	Run(ctx context.Context, code string, vars map[string]any, limit time.Duration) (any, error)
}

// Observer hears a run's progress in order: RunStarted once the call's
// run begins (after every check that may refuse the call), then for each
// node NodeStarted, its messages, NodeEnded. Streaming builds its events on
// it. Calls come from the goroutine running the flow; an Observer must not
// block for long.
type Observer interface {
	RunStarted(runID string)
	NodeStarted(nodeID string, nodeType flow.NodeType)
	Message(m Message)
	NodeEnded(nr NodeRun)
}

// NopObserver hears nothing.
type NopObserver struct{}

func (NopObserver) RunStarted(string)                 {}
func (NopObserver) NodeStarted(string, flow.NodeType) {}
func (NopObserver) Message(Message)                   {}
func (NopObserver) NodeEnded(NodeRun)                 {}

// Budget bounds a run: Nodes over the whole run, Time per call (a waiting
// run's wait for its answer is not counted), and Output, in bytes, what
// the run holds of what its flow produced, over the whole run: its
// messages and its output, as JSON, together; and, apart, the inputs and
// outputs its trace records (see NodeRun).
type Budget struct {
	Time   time.Duration
	Nodes  int
	Output int
}

// DefaultBudget is the documented one (docs/flows.md "The run budget"):
// 60 s, 200 nodes, and 1 MiB of messages and output.
var DefaultBudget = Budget{Time: 60 * time.Second, Nodes: 200, Output: 1 << 20}

// Modules are the workspace's plan modules a run consults.
type Modules struct {
	FlowScript bool
	FlowAI     bool
}

// ErrNotWaiting is returned by Continue for a run that is not waiting.
var ErrNotWaiting = errors.New("run is not waiting")

// ErrWaitingAtDelay is returned by Continue for a customer's message to a
// chat run waiting at a delay node: only its wake goes on.
var ErrWaitingAtDelay = errors.New("run is waiting at a delay, not for an answer")

// ErrWaitingAtQuestion is returned by Continue for a wake of a run waiting
// at a question: only an answer goes on.
var ErrWaitingAtQuestion = errors.New("run is waiting for an answer, not at a delay")
