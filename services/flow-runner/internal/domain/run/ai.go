package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/expression"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
)

// The AI nodes. llm, intent and extract call the provider and bill the
// plan: before the call they reserve one unit (Quota.Reserve), so that
// concurrent runs never pass ai_limit, and a node that does not succeed
// gives it back. knowledge searches the knowledge base and bills nothing.
//
// intent and extract ask for a JSON object and describe what they want in
// the system message, in lines a person (or a test provider) can read:
//
//	intents: refund, shipping
//	fields: name, email

// Limits of the calls the AI nodes make.
const (
	// guardLimit bounds one check of the safety guard.
	guardLimit = 10 * time.Second
	// knowledgeLimit bounds one knowledge-base search.
	knowledgeLimit = 10 * time.Second
	// refundLimit bounds giving back a unit, which outlives the run's ctx.
	refundLimit = 5 * time.Second
)

// NoIntent is what an intent node tells the provider to answer when no
// intent fits; any name not among the node's intents takes else.
const NoIntent = "none"

// aiCall is one AI node's provider call: the unit reserved for it, the
// call, the unit given back when the node does not succeed.
type aiCall struct {
	x    *exec
	sc   *scope
	node flow.Node
	// reserved is true while the node holds a unit it has not earned yet.
	reserved bool
	reply    ChatReply
}

// beginAI checks the module and reserves the node's unit; a non-nil
// result is the node's failure.
func (x *exec) beginAI(sc *scope, node flow.Node) (*aiCall, *stepResult) {
	if !x.modules.FlowAI {
		o := outcome{kind: failed, err: &Error{Code: CodeModuleInactive, Message: fmt.Sprintf("node %q (%s) needs the flow_ai module", sc.prefix+node.ID(), node.Type())}}
		return nil, &stepResult{stop: &o, nodeErr: NodeErrAIModuleInactive}
	}
	if x.e.LLM == nil {
		r := x.failStep(sc, node, "no LLM provider is configured (LLM_BASE_URL)")
		return nil, &r
	}
	if x.e.Quota == nil {
		r := x.failStep(sc, node, "no AI unit account is configured")
		return nil, &r
	}
	if err := x.e.Quota.Reserve(x.ctx, x.workspace); err != nil {
		if errors.Is(err, ErrQuotaExceeded) {
			o := outcome{kind: failed, err: &Error{Code: CodeQuotaExceeded, Message: fmt.Sprintf("node %q (%s): the plan's AI units are used up", sc.prefix+node.ID(), node.Type())}}
			return nil, &stepResult{stop: &o, nodeErr: CodeQuotaExceeded}
		}
		if errors.Is(err, ErrQuotaUnavailable) {
			x.res.Unavailable = err
		}
		r := x.failStep(sc, node, "could not reserve an AI unit: %s", err)
		return nil, &r
	}
	return &aiCall{x: x, sc: sc, node: node, reserved: true}, nil
}

// chat calls the provider within what is left of the run's time budget.
// A non-nil result is the node's failure (the unit already given back).
func (c *aiCall) chat(req ChatRequest, input any) *stepResult {
	x := c.x
	ctx, cancel, budgetBound, _ := x.portCtx(x.timeLeft())
	reply, err := x.e.LLM.Chat(ctx, req)
	cancel()
	if err != nil {
		var r stepResult
		// A provider that kept failing until the budget ran out fails the
		// node with its reason; one still answering when the budget ran
		// out is stopped by the budget.
		switch {
		case x.ctx.Err() != nil:
			r = x.failStep(c.sc, c.node, "run canceled: %s", context.Cause(x.ctx))
		case errors.Is(err, context.DeadlineExceeded) && (x.interrupted(ctx, budgetBound) || x.timeLeft() <= 0):
			r = x.budgetStop(c.sc, c.node)
		default:
			r = x.failStep(c.sc, c.node, "provider: %s", err)
		}
		r.input = input
		return c.fail(r)
	}
	c.reply = reply
	// What the call consumed is the run's cost whatever the node does
	// with the answer.
	x.run.Usage.Tokens += reply.Tokens
	x.run.Usage.CostUSD += reply.CostUSD
	x.res.Usage.Tokens += reply.Tokens
	x.res.Usage.CostUSD += reply.CostUSD
	return nil
}

// fail gives the unit back and returns r with what the call consumed.
func (c *aiCall) fail(r stepResult) *stepResult {
	c.refund()
	r.tokens, r.costUSD = c.reply.Tokens, c.reply.CostUSD
	return &r
}

func (c *aiCall) failf(input any, format string, args ...any) *stepResult {
	r := c.x.failStep(c.sc, c.node, format, args...)
	r.input = input
	return c.fail(r)
}

// succeed bills the node's unit and returns r with what it consumed.
func (c *aiCall) succeed(r stepResult) stepResult {
	c.reserved = false
	c.x.run.Usage.BillableUnits++
	c.x.res.Usage.BillableUnits++
	r.tokens, r.costUSD = c.reply.Tokens, c.reply.CostUSD
	return r
}

// refund gives back the node's unit. It runs after the run's ctx may have
// ended (a client that hung up), so it has a bound of its own. A unit that
// cannot be given back (the gateway unreachable just then) stays counted:
// the plan errs towards the limit, never past it.
func (c *aiCall) refund() {
	if !c.reserved {
		return
	}
	c.reserved = false
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.x.ctx), refundLimit)
	defer cancel()
	_ = c.x.e.Quota.Refund(ctx, c.x.workspace)
}

func (x *exec) llm(sc *scope, n *flow.LLM) stepResult {
	r := renderer{vars: sc.vars}
	system, prompt := r.text(n.System), r.text(n.Prompt)
	if r.err != nil {
		return x.failStep(sc, n, "%s", r.err)
	}
	req := ChatRequest{Model: n.Model, Temperature: n.Temperature, MaxTokens: n.MaxTokens}
	if system != "" {
		req.Messages = append(req.Messages, ChatMessage{Role: RoleSystem, Content: system})
	}
	req.Messages = append(req.Messages, ChatMessage{Role: RoleUser, Content: prompt})
	input := chatInput(req)
	call, failed := x.beginAI(sc, n)
	if failed != nil {
		failed.input = input
		return *failed
	}
	if failed := call.chat(req, input); failed != nil {
		return *failed
	}
	text := call.reply.Text
	out := map[string]any{"model": call.reply.Model}
	var sent *Message
	if n.Send {
		// The guard's verdict holds for everything the node hands on, not
		// only for its message: text it blocked never leaves the run, so
		// the variable (and the output or message a later node renders
		// from it) and the trace get the fallback too.
		m := x.guarded(text)
		text, sent = m.Text, &m
		out["message"] = m
		if m.GuardBlocked {
			out["guard_blocked"] = true
		}
	}
	out["text"] = text
	if n.SaveAs != "" {
		if err := x.setVar(sc, n.SaveAs, text); err != nil {
			return *call.failf(input, "%s", err)
		}
	}
	if sent != nil && !x.emit(sc, n, *sent) {
		r := x.outputStop(sc, n)
		r.input = input
		return *call.fail(r)
	}
	return call.succeed(stepResult{next: n.Next, input: input, output: out})
}

// guarded is the message an AI node sends: its text, or the fallback text
// with GuardBlocked when the guard flags it. Text the guard could not
// check is not sent either: unchecked AI text never reaches anyone. The
// message's Text is what the node then hands on everywhere else.
func (x *exec) guarded(text string) Message {
	m := Message{Type: flow.MessageText, Text: text}
	flagged := true
	if x.e.Guard != nil {
		ctx, cancel, _, _ := x.portCtx(guardLimit)
		var err error
		flagged, err = x.e.Guard.Check(ctx, text)
		cancel()
		if err != nil {
			flagged = true
		}
	}
	if flagged {
		m.Text, m.GuardBlocked = x.e.GuardFallback, true
	}
	return m
}

// askJSON is the provider call of intent and extract: the rendered text as
// the user message under system, a JSON object asked for and read. A
// non-nil failed is the node's failure (its unit given back).
func (x *exec) askJSON(sc *scope, node flow.Node, text *flow.Template, system string) (call *aiCall, input, answer map[string]any, failed *stepResult) {
	rendered, err := render(text, sc.vars)
	if err != nil {
		r := x.failStep(sc, node, "text: %s", err)
		return nil, nil, nil, &r
	}
	input = map[string]any{"text": rendered}
	req := ChatRequest{JSON: true, Messages: []ChatMessage{
		{Role: RoleSystem, Content: system},
		{Role: RoleUser, Content: rendered},
	}}
	if call, failed = x.beginAI(sc, node); failed != nil {
		failed.input = input
		return nil, nil, nil, failed
	}
	if failed = call.chat(req, input); failed != nil {
		return nil, nil, nil, failed
	}
	if err := json.Unmarshal([]byte(call.reply.Text), &answer); err != nil || answer == nil {
		return nil, nil, nil, call.failf(input, "the provider's answer is not a JSON object: %s", truncate(call.reply.Text, 200))
	}
	return call, input, answer, nil
}

func (x *exec) intent(sc *scope, n *flow.Intent) stepResult {
	call, input, answer, failed := x.askJSON(sc, n, n.Text, intentPrompt(n.Intents))
	if failed != nil {
		return *failed
	}
	name, _ := answer["intent"].(string)
	next, branch := n.Else, "else"
	for _, o := range n.Intents {
		if o.Name == name {
			next, branch = o.Next, o.Name
			break
		}
	}
	if n.SaveAs != "" {
		if err := x.setVar(sc, n.SaveAs, name); err != nil {
			return *call.failf(input, "%s", err)
		}
	}
	return call.succeed(stepResult{next: next, input: input, output: map[string]any{"intent": name, "branch": branch}})
}

// intentPrompt asks for one of the intents, described with their examples.
func intentPrompt(intents []flow.IntentOption) string {
	var b strings.Builder
	names := make([]string, len(intents))
	for i, o := range intents {
		names[i] = o.Name
	}
	fmt.Fprintf(&b, "Classify the customer's message into one of the intents below. "+
		"Answer with a JSON object {\"intent\": \"<name>\"}, using %q when none fits.\n", NoIntent)
	fmt.Fprintf(&b, "intents: %s\n", strings.Join(names, ", "))
	for _, o := range intents {
		fmt.Fprintf(&b, "- %s", o.Name)
		if o.Description != "" {
			fmt.Fprintf(&b, ": %s", o.Description)
		}
		if len(o.Examples) > 0 {
			fmt.Fprintf(&b, " (examples: %s)", strings.Join(o.Examples, "; "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (x *exec) extract(sc *scope, n *flow.Extract) stepResult {
	call, input, answer, failed := x.askJSON(sc, n, n.Text, extractPrompt(n.Fields))
	if failed != nil {
		return *failed
	}
	// The object holds the node's fields only; a field the provider could
	// not find is null, and a required one fails the node.
	got := make(map[string]any, len(n.Fields))
	for _, f := range n.Fields {
		v := answer[f.Name]
		if s, ok := v.(string); ok && strings.TrimSpace(s) == "" {
			v = nil
		}
		if v == nil && f.Required {
			return *call.failf(input, "the required field %q was not found", f.Name)
		}
		got[f.Name] = v
	}
	value, err := expression.Normalize(got, expression.MaxStringBytes)
	if err != nil {
		return *call.failf(input, "%s", err)
	}
	if n.SaveAs != "" {
		if err := x.setVar(sc, n.SaveAs, value); err != nil {
			return *call.failf(input, "%s", err)
		}
	}
	return call.succeed(stepResult{next: n.Next, input: input, output: value})
}

// extractPrompt asks for an object holding the fields.
func extractPrompt(fields []flow.ExtractField) string {
	var b strings.Builder
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	b.WriteString("Extract the fields below from the customer's message. " +
		"Answer with a JSON object holding them; use null for a field the message does not give.\n")
	fmt.Fprintf(&b, "fields: %s\n", strings.Join(names, ", "))
	for _, f := range fields {
		fmt.Fprintf(&b, "- %s", f.Name)
		if f.Type != "" {
			fmt.Fprintf(&b, " (%s)", f.Type)
		}
		if f.Description != "" {
			fmt.Fprintf(&b, ": %s", f.Description)
		}
		if f.Required {
			b.WriteString(" [required]")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (x *exec) knowledge(sc *scope, n *flow.Knowledge) stepResult {
	query, err := render(n.Query, sc.vars)
	if err != nil {
		return x.failStep(sc, n, "query: %s", err)
	}
	input := map[string]any{"query": query, "top_k": float64(n.TopK)}
	if x.e.Knowledge == nil {
		r := x.failStep(sc, n, "no knowledge base is configured")
		r.input = input
		return r
	}
	ctx, cancel, budgetBound, _ := x.portCtx(knowledgeLimit)
	passages, err := x.e.Knowledge.Search(ctx, x.workspace, query, n.TopK)
	cancel()
	if err != nil {
		var r stepResult
		switch {
		case x.interrupted(ctx, budgetBound):
			r = x.budgetStop(sc, n)
		default:
			r = x.failStep(sc, n, "search: %s", err)
		}
		r.input = input
		return r
	}
	list := make([]any, len(passages))
	for i, p := range passages {
		list[i] = map[string]any{"title": p.Title, "text": p.Text, "score": p.Score}
	}
	value, err := expression.Normalize(list, MaxVarsBytes)
	if err != nil {
		r := x.failStep(sc, n, "%s", err)
		r.input = input
		return r
	}
	if n.SaveAs != "" {
		if err := x.setVar(sc, n.SaveAs, value); err != nil {
			r := x.failStep(sc, n, "%s", err)
			r.input = input
			return r
		}
	}
	return stepResult{next: n.Next, input: input, output: value}
}

// chatInput is an AI node's trace input: what it asked the provider.
func chatInput(req ChatRequest) map[string]any {
	msgs := make([]any, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	in := map[string]any{"messages": msgs}
	if req.Model != "" {
		in["model"] = req.Model
	}
	return in
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
