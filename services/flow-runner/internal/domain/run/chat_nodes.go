package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/expression"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
)

// The chat run's side of the engine (docs/chat.md "The chat-only nodes"):
// its variables, the chat-only nodes, and the nodes it does not run. What
// a node does to the conversation is an Action of the call, listed in the
// order the nodes did it, messages included (see emit).

// NodeErrTypeUnsupported is the node error of a node a chat run does not
// run (tool, order, submit_form, an action other than set_variable and
// webhook_call); the run fails node_failed, and its caller hands the
// conversation over.
const NodeErrTypeUnsupported = "node_type_unsupported"

// invokeChat starts a chat run: its vars are the conversation's, its
// input {text} of the customer's message.
func (e *Engine) invokeChat(ctx context.Context, def *flow.Definition, inv Invocation) *Result {
	chat := inv.Chat.Chat
	msg := inv.Chat.Message
	r := &Run{
		ID: inv.RunID, FlowID: inv.FlowID, Version: inv.Version, WorkspaceID: inv.WorkspaceID,
		Status: StatusRunning, Output: map[string]any{}, StartedAt: e.now(), CurrentNodeID: def.Start.ID(),
		Chat: &chat,
		Vars: map[string]any{
			"input":           map[string]any{"text": msg.Text},
			"message":         messageVar(msg),
			"contact":         map[string]any{"id": chat.ContactID, "name": chat.ContactName},
			"conversation_id": chat.ConversationID,
			"channel":         map[string]any{"id": chat.ChannelID, "kind": chat.ChannelKind},
		},
	}
	x := e.newExec(ctx, r, inv.Modules, inv.Observer, inv.WorkspaceID)
	x.sessionID = inv.SessionID
	x.res.Actions = []Action{}
	x.obs.RunStarted(r.ID)
	if _, err := expression.Normalize(r.Vars, MaxVarsBytes); err != nil {
		x.finish(x.fail(x.top(def), def.Start.ID(), string(flow.TypeStart), "message: "+err.Error()))
		return x.res
	}
	x.finish(x.walk(x.top(def), def.Start.ID()))
	return x.res
}

// messageVar is vars.message: {id, text, type, postback}, postback only
// for a tap on a button.
func messageVar(m CustomerMessage) map[string]any {
	v := map[string]any{"id": m.ID, "text": m.Text, "type": m.Type}
	if m.Postback != "" {
		v["postback"] = m.Postback
	}
	return v
}

// customerText is vars.message.text of the run: what ai_response answers.
func (x *exec) customerText() string {
	m, _ := x.run.Vars["message"].(map[string]any)
	s, _ := m["text"].(string)
	return s
}

// act lists a for the caller.
func (x *exec) act(a Action) { x.res.Actions = append(x.res.Actions, a) }

// chatStep runs a chat-only node of a chat run.
func (x *exec) chatStep(sc *scope, node flow.Node) stepResult {
	switch n := node.(type) {
	case *flow.AIResponse:
		return x.aiResponse(sc, n)
	case *flow.Handover:
		return x.handover(sc, n)
	case *flow.ResumeAI:
		x.act(Action{Kind: ActionResumeAI, NodeID: sc.prefix + n.ID()})
		return stepResult{next: n.Next}
	case *flow.Tag:
		return x.tag(sc, n)
	case *flow.Assign:
		return x.assignOperator(sc, n)
	case *flow.Delay:
		return x.delay(sc, n)
	}
	return x.unsupported(sc, node)
}

// unsupported fails a chat run at a node it does not run.
func (x *exec) unsupported(sc *scope, node flow.Node) stepResult {
	o := x.fail(sc, node.ID(), string(node.Type()), NodeErrTypeUnsupported+": a chat run does not run this node")
	return stepResult{stop: &o, nodeErr: NodeErrTypeUnsupported}
}

func (x *exec) handover(sc *scope, n *flow.Handover) stepResult {
	out := map[string]any{}
	if n.Text != nil {
		r := x.messageRenderer(sc.vars)
		text := r.text(n.Text)
		if errors.Is(r.err, errOutputBudget) {
			return x.outputStop(sc, n)
		}
		if r.err != nil {
			return x.failStep(sc, n, "text: %s", r.err)
		}
		// A text that renders to nothing sends nothing: a channel has no
		// empty message.
		if strings.TrimSpace(text) != "" {
			m := Message{Type: flow.MessageText, Text: text}
			if !x.emit(sc, n, m) {
				return x.outputStop(sc, n)
			}
			out["message"] = m
		}
	}
	reason := "handover node " + n.ID()
	x.act(Action{Kind: ActionHandover, NodeID: sc.prefix + n.ID(), Reason: reason})
	out["reason"] = reason
	return stepResult{next: n.Next, output: out}
}

func (x *exec) tag(sc *scope, n *flow.Tag) stepResult {
	var tags []string
	seen := map[string]bool{}
	for i, t := range n.Tags {
		s, err := render(t, sc.vars)
		if err != nil {
			return x.failStep(sc, n, "tags[%d]: %s", i, err)
		}
		s = strings.TrimSpace(s)
		if why := flow.CheckTag(s); why != "" {
			return x.failStep(sc, n, "tags[%d]: %s", i, why)
		}
		// Messaging keeps a tag once, whatever its case.
		if key := strings.ToLower(s); !seen[key] {
			seen[key] = true
			tags = append(tags, s)
		}
	}
	x.act(Action{Kind: ActionTag, NodeID: sc.prefix + n.ID(), Tags: tags})
	list := make([]any, len(tags))
	for i, t := range tags {
		list[i] = t
	}
	return stepResult{next: n.Next, output: map[string]any{"tags": list}}
}

func (x *exec) assignOperator(sc *scope, n *flow.Assign) stepResult {
	s, err := render(n.Operator, sc.vars)
	if err != nil {
		return x.failStep(sc, n, "operator: %s", err)
	}
	s = strings.TrimSpace(s)
	if why := flow.CheckEmail(s); why != "" {
		return x.failStep(sc, n, "operator: %s", why)
	}
	x.act(Action{Kind: ActionAssign, NodeID: sc.prefix + n.ID(), Operator: s})
	return stepResult{next: n.Next, output: map[string]any{"operator": s}}
}

// delay makes the run wait until its WakeAt: the caller wakes it then
// (Continuation.Wake). A time already past goes on at once.
func (x *exec) delay(sc *scope, n *flow.Delay) stepResult {
	if !sc.top {
		return x.failStep(sc, n, "a called flow cannot wait")
	}
	if sc.inBody > 0 {
		// As a question: a wait would have to resume the loop's iteration.
		return x.failStep(sc, n, "a delay inside a loop body cannot wait")
	}
	now := x.e.now()
	var wake time.Time
	var input map[string]any
	if n.Until != nil {
		s, err := render(n.Until, sc.vars)
		if err != nil {
			return x.failStep(sc, n, "until: %s", err)
		}
		input = map[string]any{"until": s}
		if wake, err = time.Parse(time.RFC3339, strings.TrimSpace(s)); err != nil {
			r := x.failStep(sc, n, "until: %q is not an RFC 3339 time", truncate(s, 60))
			r.input = input
			return r
		}
		if !wake.After(now) {
			return stepResult{next: n.Next, input: input, output: map[string]any{"waited": false}}
		}
	} else {
		input = map[string]any{"seconds": float64(n.Seconds)}
		wake = now.Add(time.Duration(n.Seconds) * time.Second)
	}
	wake = wake.UTC()
	x.run.WakeAt = &wake
	return stepResult{input: input, output: map[string]any{"wake_at": wake.Format(time.RFC3339Nano)}, stop: &outcome{kind: waiting}}
}

// wake runs the continue of a delay: one node run recording the wake,
// then the walk from the delay's next.
func (x *exec) wake(sc *scope, d *flow.Delay) outcome {
	var input map[string]any
	if x.run.WakeAt != nil {
		input = map[string]any{"wake_at": x.run.WakeAt.UTC().Format(time.RFC3339Nano)}
	}
	x.run.WakeAt = nil
	if o, stopped := x.checkBudget(sc, d); stopped {
		return o
	}
	res := x.runNode(sc, d, func() stepResult {
		return stepResult{next: d.Next, input: input, output: map[string]any{"woke_at": x.e.now().UTC().Format(time.RFC3339Nano)}}
	})
	if res.stop != nil {
		return *res.stop
	}
	return x.walk(sc, res.next)
}

// aiResponse answers the customer's message: the knowledge base's
// passages (when knowledge), one provider call, the guard, a message. It
// bills a unit like llm. A provider (or search) that fails sends the
// fallback when the node has one: the node goes on, unbilled, its trace
// saying why.
func (x *exec) aiResponse(sc *scope, n *flow.AIResponse) stepResult {
	text := x.customerText()
	input := map[string]any{"text": text}
	r := renderer{vars: sc.vars}
	system := r.text(n.System)
	if r.err != nil {
		res := x.failStep(sc, n, "system: %s", r.err)
		res.input = input
		return res
	}
	call, failed := x.beginAI(sc, n)
	if failed != nil {
		failed.input = input
		return *failed
	}
	var passages []Passage
	if n.Knowledge {
		input["top_k"] = float64(n.TopK)
		var err error
		passages, err = x.searchAnswer(text, n.TopK)
		if err != nil {
			var res stepResult
			switch {
			case x.ctx.Err() != nil:
				res = x.failStep(sc, n, "run canceled: %s", context.Cause(x.ctx))
			case errors.Is(err, errBudget):
				res = x.budgetStop(sc, n)
			default:
				return x.answerFallback(sc, n, call, input, err.Error())
			}
			res.input = input
			return *call.fail(res)
		}
		list := make([]any, len(passages))
		for i, p := range passages {
			list[i] = map[string]any{"title": p.Title, "text": p.Text, "score": p.Score}
		}
		input["passages"] = list
	}
	req := ChatRequest{Messages: []ChatMessage{
		{Role: RoleSystem, Content: answerPrompt(system, x.run.Chat.WorkspaceName, n.Knowledge, passages)},
		{Role: RoleUser, Content: text},
	}}
	input["messages"] = chatInput(req)["messages"]
	if failed := call.chat(req, input); failed != nil {
		// The provider's own failure may take the fallback; the run's
		// budget or cancellation may not.
		if failed.stop.err.Code == CodeNodeFailed && x.ctx.Err() == nil {
			return x.answerFallback(sc, n, call, input, failed.nodeErr)
		}
		return *failed
	}
	if strings.TrimSpace(call.reply.Text) == "" {
		return x.answerFallback(sc, n, call, input, "the provider's answer is empty")
	}
	m := x.guarded(call.reply.Text)
	out := map[string]any{"model": call.reply.Model, "text": m.Text, "message": m}
	if m.GuardBlocked {
		out["guard_blocked"] = true
	}
	if !x.emit(sc, n, m) {
		res := x.outputStop(sc, n)
		res.input = input
		return *call.fail(res)
	}
	return call.succeed(stepResult{next: n.Next, input: input, output: out})
}

// errBudget is a port call the run's time budget stopped.
var errBudget = errors.New("the run's time budget")

// searchAnswer is ai_response's knowledge search; errBudget when the run's
// time budget stopped it.
func (x *exec) searchAnswer(text string, topK int) ([]Passage, error) {
	if strings.TrimSpace(text) == "" {
		// A message without text (an image) shares no word with a passage.
		return nil, nil
	}
	if x.e.Knowledge == nil {
		return nil, errors.New("no knowledge base is configured")
	}
	ctx, cancel, budgetBound, _ := x.portCtx(knowledgeLimit)
	passages, err := x.e.Knowledge.Search(ctx, x.workspace, text, topK)
	cancel()
	switch {
	case err == nil:
		return passages, nil
	case x.interrupted(ctx, budgetBound):
		return nil, errBudget
	}
	return nil, fmt.Errorf("search: %w", err)
}

// answerFallback is ai_response when no answer came (why): the fallback
// sent, the unit given back; or, without one, the node's failure.
func (x *exec) answerFallback(sc *scope, n *flow.AIResponse, call *aiCall, input map[string]any, why string) stepResult {
	if n.Fallback == nil {
		return *call.failf(input, "%s", why)
	}
	r := x.messageRenderer(sc.vars)
	text := r.text(n.Fallback)
	if errors.Is(r.err, errOutputBudget) {
		res := x.outputStop(sc, n)
		res.input = input
		return *call.fail(res)
	}
	if r.err != nil {
		return *call.failf(input, "%s; fallback: %s", why, r.err)
	}
	if strings.TrimSpace(text) == "" {
		return *call.failf(input, "%s; the fallback is empty", why)
	}
	m := Message{Type: flow.MessageText, Text: text}
	if !x.emit(sc, n, m) {
		res := x.outputStop(sc, n)
		res.input = input
		return *call.fail(res)
	}
	call.refund()
	return stepResult{next: n.Next, input: input, nodeErr: why, tokens: call.reply.Tokens, costUSD: call.reply.CostUSD,
		output: map[string]any{"fallback": true, "text": text, "message": m}}
}

// answerPrompt is ai_response's system message: the node's own text, or
// the default one naming the workspace, then the passages found.
func answerPrompt(system, workspace string, knowledge bool, passages []Passage) string {
	if workspace == "" {
		workspace = "this business"
	}
	var b strings.Builder
	switch {
	case strings.TrimSpace(system) != "":
		b.WriteString(system)
	case knowledge:
		fmt.Fprintf(&b, "You are the customer assistant of %s. Answer the customer's message briefly and politely, "+
			"in the customer's language, from the passages of %s's knowledge base below. When they do not hold the answer, "+
			"say you do not know and offer to pass the conversation to a person; never make up facts.", workspace, workspace)
	default:
		fmt.Fprintf(&b, "You are the customer assistant of %s. Answer the customer's message briefly and politely, "+
			"in the customer's language. When you do not know the answer, say so and offer to pass the conversation "+
			"to a person; never make up facts.", workspace)
	}
	if !knowledge {
		return b.String()
	}
	if len(passages) == 0 {
		b.WriteString("\n\nKnowledge base passages: none matches the message.")
		return b.String()
	}
	b.WriteString("\n\nKnowledge base passages:")
	for i, p := range passages {
		fmt.Fprintf(&b, "\n\n[%d] %s\n%s", i+1, p.Title, p.Text)
	}
	return b.String()
}
