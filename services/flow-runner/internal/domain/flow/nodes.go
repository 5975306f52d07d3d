package flow

import "time"

// base holds what every node has.
type base struct {
	id  string
	typ NodeType
}

func (b base) ID() string     { return b.id }
func (b base) Type() NodeType { return b.typ }
func nextEdge(next string) []Edge {
	if next == "" {
		return nil
	}
	return []Edge{{Field: "next", To: next}}
}

// Start is the one entry of a flow.
type Start struct {
	base
	Next string
}

func (n *Start) Targets() []Edge { return nextEdge(n.Next) }

// Message types of send_message.
const (
	MessageText         = "text"
	MessageQuickReplies = "quick_replies"
	MessageButtons      = "buttons"
	MessageCarousel     = "carousel"
)

// Message is a send_message's message, every string a template. Its shape
// follows messaging's send rules (docs/sending.md "The order of checks").
type Message struct {
	Type         string
	Text         *Template
	QuickReplies []*Template
	Buttons      []Button
	Cards        []Card
}

// Button types.
const (
	ButtonWebURL   = "web_url"
	ButtonPostback = "postback"
)

// Button is a message or card button: web_url with a URL, or postback with
// a payload.
type Button struct {
	Type    string
	Title   *Template
	URL     *Template
	Payload *Template
}

// Card is one carousel element.
type Card struct {
	Title    *Template
	Subtitle *Template
	ImageURL *Template
	Buttons  []Button
}

// SendMessage appends a flow message to the run's messages.
type SendMessage struct {
	base
	Message Message
	Next    string
}

func (n *SendMessage) Targets() []Edge { return nextEdge(n.Next) }

// Input types of a question.
const (
	InputText   = "text"
	InputNumber = "number"
	InputEmail  = "email"
	InputPhone  = "phone"
	InputFile   = "file"
)

// Question sends its text and waits for a continue.
type Question struct {
	base
	Text         *Template
	QuickReplies []*Template
	SaveAs       string
	InputType    string
	Next         string
}

func (n *Question) Targets() []Edge { return nextEdge(n.Next) }

// Case is one branch of a staged multi-branch condition.
type Case struct {
	If   *Expr
	Next string
}

// Condition branches: If/Then/Else, or Cases (staged) and Else. A missing
// branch ends the run (or the loop iteration), as a missing next does.
type Condition struct {
	base
	If    *Expr
	Then  string
	Cases []Case
	Else  string
}

func (n *Condition) Targets() []Edge {
	var out []Edge
	if n.Then != "" {
		out = append(out, Edge{Field: "then", To: n.Then})
	}
	for i, c := range n.Cases {
		out = append(out, Edge{Field: caseField(i), To: c.Next})
	}
	if n.Else != "" {
		out = append(out, Edge{Field: "else", To: n.Else})
	}
	return out
}

// Assignment is one variable write: a name and its value (an expression, or
// a template when the string holds {{ }}, or a JSON literal).
type Assignment struct {
	Name  string
	Value *Value
	Expr  *Expr
}

// Variable operations (the staged op form).
const (
	OpSet       = "set"
	OpIncrement = "increment"
	OpDecrement = "decrement"
	OpAppend    = "append"
	OpRemove    = "remove"
	OpClear     = "clear"
)

// Variable writes vars: Set in document order, or the staged Op on Name.
type Variable struct {
	base
	Set []Assignment
	// Op is empty for the set{} form.
	Op string
	// Target is the op's variable and value (Value nil where the op takes
	// none: clear, and increment/decrement by 1).
	Target Assignment
	Next   string
}

func (n *Variable) Targets() []Edge { return nextEdge(n.Next) }

// Header is one request header, its value a template.
type Header struct {
	Name  string
	Value *Template
}

// MaxHTTPTimeout bounds an http node's timeout_ms.
const MaxHTTPTimeout = 10 * time.Second

// HTTP calls a URL; its response is saved as {status, headers, body}.
type HTTP struct {
	base
	Method  string
	URL     *Template
	Headers []Header
	// Body is nil without a body; a string body is sent as text, any other
	// JSON as JSON.
	Body    *Value
	Timeout time.Duration
	SaveAs  string
	OnError string
	Next    string
}

func (n *HTTP) Targets() []Edge {
	out := nextEdge(n.Next)
	if n.OnError != "" {
		out = append(out, Edge{Field: "on_error", To: n.OnError})
	}
	return out
}

// LLM asks the LLM provider (AI; run by the engine's LLM port).
type LLM struct {
	base
	System      *Template
	Prompt      *Template
	Model       string
	Temperature *float64
	MaxTokens   int
	SaveAs      string
	Send        bool
	Next        string
}

func (n *LLM) Targets() []Edge { return nextEdge(n.Next) }

// MaxTopK bounds a knowledge node's top_k.
const MaxTopK = 10

// Knowledge searches the workspace's knowledge base.
type Knowledge struct {
	base
	Query  *Template
	TopK   int
	SaveAs string
	Next   string
}

func (n *Knowledge) Targets() []Edge { return nextEdge(n.Next) }

// IntentOption is one intent of an intent node.
type IntentOption struct {
	Name        string
	Description string
	Examples    []string
	Next        string
}

// Intent classifies text into one of its intents (AI).
type Intent struct {
	base
	Text    *Template
	Intents []IntentOption
	Else    string
	SaveAs  string
}

func (n *Intent) Targets() []Edge {
	var out []Edge
	for i, o := range n.Intents {
		if o.Next != "" {
			out = append(out, Edge{Field: intentField(i), To: o.Next})
		}
	}
	if n.Else != "" {
		out = append(out, Edge{Field: "else", To: n.Else})
	}
	return out
}

// ExtractField is one field an extract node asks for.
type ExtractField struct {
	Name        string
	Type        string
	Description string
	Required    bool
}

// Extract extracts fields from text into an object (AI).
type Extract struct {
	base
	Text           *Template
	Fields         []ExtractField
	SaveAs         string
	CaptureContact bool
	Next           string
}

func (n *Extract) Targets() []Edge { return nextEdge(n.Next) }

// Loop bounds.
const (
	DefaultMaxIterations = 100
	MaxMaxIterations     = 1000
)

// Loop runs Body once per item of Over (at most MaxIterations), with
// vars.<As> set to the item, then goes on to Next. Inside the body, a node
// with no next ends the iteration.
type Loop struct {
	base
	Over          *Expr
	As            string
	Body          string
	MaxIterations int
	Next          string
}

func (n *Loop) Targets() []Edge {
	return append([]Edge{{Field: "body", To: n.Body}}, nextEdge(n.Next)...)
}

// CallFlow runs another flow's published version (staged).
type CallFlow struct {
	base
	FlowID string
	// Input is an object value, or nil for {}.
	Input  *Value
	SaveAs string
	Next   string
}

func (n *CallFlow) Targets() []Edge { return nextEdge(n.Next) }

// MaxScriptBytes bounds a script's code.
const MaxScriptBytes = 64 << 10

// Script runs sandboxed JavaScript (staged).
type Script struct {
	base
	Code   string
	SaveAs string
	Next   string
}

func (n *Script) Targets() []Edge { return nextEdge(n.Next) }

// End completes the run with its output.
type End struct {
	base
	// Output is an object value, or nil for {}.
	Output *Value
}

func (n *End) Targets() []Edge { return nil }

// Action kinds that a headless run may execute.
const (
	ActionSetVariable = "set_variable"
	ActionWebhookCall = "webhook_call"
)

// Action is a v1 action node. set_variable writes SetVariable;
// webhook_call makes the request of Webhook (an http node's fields, POST by
// default). Other kinds are chat-only.
type Action struct {
	base
	Kind        string
	SetVariable *Assignment
	Webhook     *HTTP
	Next        string
}

func (n *Action) Targets() []Edge {
	if n.Webhook != nil {
		return n.Webhook.Targets()
	}
	return nextEdge(n.Next)
}

// The chat-only nodes below run only in chat runs (docs/chat.md "The
// chat-only nodes"); each makes the flow not invokable.

// DefaultAnswerTopK is an ai_response's top_k when it gives none.
const DefaultAnswerTopK = 3

// AIResponse is the assistant's answer as one node: a knowledge search
// with the customer's text, one LLM call, the guard, a message (AI).
type AIResponse struct {
	base
	// System is the node's own system text; nil takes the default one
	// naming the workspace.
	System *Template
	// Knowledge searches the knowledge base for TopK passages first.
	Knowledge bool
	TopK      int
	// Fallback is sent instead when the provider fails; nil fails the node.
	Fallback *Template
	Next     string
}

func (n *AIResponse) Targets() []Edge { return nextEdge(n.Next) }

// Handover sends Text (when set) and stops the AI in the conversation.
type Handover struct {
	base
	Text *Template
	Next string
}

func (n *Handover) Targets() []Edge { return nextEdge(n.Next) }

// ResumeAI turns the AI back on in the conversation.
type ResumeAI struct {
	base
	Next string
}

func (n *ResumeAI) Targets() []Edge { return nextEdge(n.Next) }

// Tag bounds; they are messaging's, so that a tag the node adds is never
// refused when its action is carried out (docs/limits-and-errors.md
// "Limits").
const (
	MaxTagsPerNode = 20
	MaxTagLen      = 50
)

// Tag adds Tags to the conversation.
type Tag struct {
	base
	Tags []*Template
	Next string
}

func (n *Tag) Targets() []Edge { return nextEdge(n.Next) }

// MaxEmailLen bounds an assign node's operator address.
const MaxEmailLen = 254

// Assign assigns the conversation to an operator, by email.
type Assign struct {
	base
	Operator *Template
	Next     string
}

func (n *Assign) Targets() []Edge { return nextEdge(n.Next) }

// MaxDelaySeconds bounds a delay node's seconds.
const MaxDelaySeconds = 86_400

// Delay makes a chat run wait: Seconds, or until the time Until renders to
// (RFC 3339; staged as delay.until). Exactly one is set.
type Delay struct {
	base
	Seconds int
	Until   *Template
	Next    string
}

func (n *Delay) Targets() []Edge { return nextEdge(n.Next) }

// ChatOnly is a node of a chat-only type that no run executes (tool,
// order, submit_form), kept for its edges: it makes the flow not
// invokable, and a chat run that reaches it fails.
type ChatOnly struct {
	base
	Next string
}

func (n *ChatOnly) Targets() []Edge { return nextEdge(n.Next) }
