// Package flow is the typed model of flow definitions (docs/flows.md "The
// document"): one struct per node type behind the Node interface, parsed
// and validated once, when a version is published, with every expression
// and template compiled. A *Definition is immutable after Parse and safe to
// share between runs.
package flow

import (
	"fmt"
	"strings"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/expression"
)

// NodeType names a node's kind, as written in "type".
type NodeType string

// The node types (docs/flows.md "Node types").
const (
	TypeStart       NodeType = "start"
	TypeSendMessage NodeType = "send_message"
	TypeQuestion    NodeType = "question"
	TypeCondition   NodeType = "condition"
	TypeVariable    NodeType = "variable"
	TypeHTTP        NodeType = "http"
	TypeLLM         NodeType = "llm"
	TypeKnowledge   NodeType = "knowledge"
	TypeIntent      NodeType = "intent"
	TypeExtract     NodeType = "extract"
	TypeLoop        NodeType = "loop"
	TypeCallFlow    NodeType = "call_flow"
	TypeScript      NodeType = "script"
	TypeEnd         NodeType = "end"

	// Chat-only types: accepted at publish, refused by NotInvokable (except
	// action set_variable and webhook_call).
	TypeTool       NodeType = "tool"
	TypeDelay      NodeType = "delay"
	TypeAIResponse NodeType = "ai_response"
	TypeHandover   NodeType = "handover"
	TypeTag        NodeType = "tag"
	TypeAssign     NodeType = "assign"
	TypeOrder      NodeType = "order"
	TypeResumeAI   NodeType = "resume_ai"
	TypeSubmitForm NodeType = "submit_form"
	TypeAction     NodeType = "action"
)

// Node is one node of a definition.
type Node interface {
	// ID returns the node's id, unique in its definition.
	ID() string
	// Type returns the node's type.
	Type() NodeType
	// Targets returns the node's outgoing edges, in a fixed order.
	Targets() []Edge
}

// Edge is one outgoing edge: the field that holds it ("next", "then",
// "cases[1].next", "body", ...) and the id it names.
type Edge struct {
	Field string
	To    string
}

// Definition is a parsed, validated flow version.
type Definition struct {
	Name        string
	Description string
	Triggers    []string
	// Nodes in the order the document lists them.
	Nodes []Node
	// Start is the one start node.
	Start *Start

	byID map[string]Node
}

// Node returns the node with the given id, or nil.
func (d *Definition) Node(id string) Node { return d.byID[id] }

// HasTrigger reports whether the definition lists trigger t ("api", "chat").
func (d *Definition) HasTrigger(t string) bool {
	for _, x := range d.Triggers {
		if x == t {
			return true
		}
	}
	return false
}

// ValidationError is a refused definition: the node (empty for the document
// itself), the field, and why.
type ValidationError struct {
	NodeID string
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	if e.NodeID != "" {
		fmt.Fprintf(&b, "node %q: ", e.NodeID)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q: ", e.Field)
	}
	b.WriteString(e.Reason)
	return strings.ReplaceAll(b.String(), "\n", " ")
}

// NotInvokableError names the first node a headless run may not use.
type NotInvokableError struct {
	NodeID   string
	NodeType NodeType
	Reason   string
}

func (e *NotInvokableError) Error() string {
	return fmt.Sprintf("node %q (%s) is not invokable: %s", e.NodeID, e.NodeType, e.Reason)
}

// NotInvokable returns the first node, in document order, that a headless
// (API) run may not use, or nil when the whole flow is invokable. It is
// checked on every invoke against the version then published, so that a flow
// edited and republished is judged at once.
func (d *Definition) NotInvokable() *NotInvokableError {
	for _, n := range d.Nodes {
		if reason := notInvokable(n); reason != "" {
			return &NotInvokableError{NodeID: n.ID(), NodeType: n.Type(), Reason: reason}
		}
	}
	return nil
}

func notInvokable(n Node) string {
	switch n := n.(type) {
	case *ChatOnly, *AIResponse, *Handover, *ResumeAI, *Tag, *Assign, *Delay:
		return "a chat-only node; a headless run has no customer or conversation"
	case *Action:
		if n.Kind != ActionSetVariable && n.Kind != ActionWebhookCall {
			return fmt.Sprintf("action %q is chat-only (only set_variable and webhook_call run headless)", n.Kind)
		}
	case *Question:
		if n.InputType == InputFile {
			return "a question with input_type file needs a conversation to receive the file"
		}
	case *Extract:
		if n.CaptureContact {
			return "capture_contact needs a conversation's contact"
		}
	}
	return ""
}

// AINode returns the first AI node (llm, intent, extract or ai_response:
// the nodes that call the LLM provider and bill a unit), or nil. A flow
// with one needs the safety guard wired before it may run.
func (d *Definition) AINode() Node {
	for _, n := range d.Nodes {
		switch n.(type) {
		case *LLM, *Intent, *Extract, *AIResponse:
			return n
		}
	}
	return nil
}

// Waits returns the first node that makes a run wait (a question or a
// delay), or nil. A call_flow target must have none.
func (d *Definition) Waits() Node {
	for _, n := range d.Nodes {
		switch n.(type) {
		case *Question, *Delay:
			return n
		}
	}
	return nil
}

// compile-time list of what a Template or an expression field holds, used by
// the node structs below.
type (
	// Template is a string field that may hold {{ expression }} parts.
	Template = expression.Template
	// Expr is a compiled expression field (if, over, variable values).
	Expr = expression.Program
	// Value is a JSON field whose strings are templates.
	Value = expression.Value
)
