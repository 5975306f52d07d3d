package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/parleyhq/parley/pkg/bytesize"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/expression"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
)

// Engine runs definitions. Its zero value runs every node that needs no
// port, with DefaultBudget and the system clock; set the ports the service
// has. An Engine is safe for concurrent use.
type Engine struct {
	HTTP    HTTPCaller
	Flows   Flows
	Scripts Scripts
	// LLM, Guard, Knowledge and Quota serve the AI nodes (ports_ai.go).
	LLM       LLM
	Guard     Guard
	Knowledge KnowledgeBase
	Quota     Quota
	// GuardFallback replaces AI text the guard flagged or could not check.
	GuardFallback string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Budget bounds each run; a zero field takes DefaultBudget's.
	Budget Budget
	// ScriptLimit bounds one script node (the run budget may stop it
	// sooner); zero means 10 s.
	ScriptLimit time.Duration
}

// Invocation is the first call of a run.
type Invocation struct {
	RunID       string
	FlowID      string
	Version     int
	WorkspaceID string
	// SessionID is given to the run if it waits at a question.
	SessionID string
	// Input becomes vars.input; a chat run ignores it (its vars.input is
	// {text} of the starting message).
	Input    map[string]any
	Modules  Modules
	Observer Observer
	// Chat, when set, makes the run a chat run (chat.go).
	Chat *ChatInvocation
}

// Continuation answers a waiting run's question.
type Continuation struct {
	// Text is input.text of the continue; only it is read.
	Text     string
	Modules  Modules
	Observer Observer
	// Message, in a chat run waiting at a question, is the customer's
	// message that answers it (Text is its text).
	Message *CustomerMessage
	// Wake, in a chat run waiting at a delay node, says the delay is over.
	Wake bool
}

// Invoke starts a run of def, which the caller has checked with
// NotInvokable (a headless run) or HasTrigger("chat") (a chat run, with
// inv.Chat set). The run ends completed, waiting or failed; the caller
// stores it, and carries out a chat run's Result.Actions.
func (e *Engine) Invoke(ctx context.Context, def *flow.Definition, inv Invocation) *Result {
	if inv.Chat != nil {
		return e.invokeChat(ctx, def, inv)
	}
	// The input is read as JSON, whatever number types its decoder used, so
	// that expressions see the same values on every call and after a reload.
	input := map[string]any{}
	var inputErr error
	if inv.Input != nil {
		var v any
		if v, inputErr = expression.Normalize(inv.Input, MaxVarsBytes); inputErr == nil {
			input = v.(map[string]any)
		}
	}
	r := &Run{
		ID: inv.RunID, FlowID: inv.FlowID, Version: inv.Version, WorkspaceID: inv.WorkspaceID,
		Status: StatusRunning, Vars: map[string]any{"input": input}, Output: map[string]any{}, StartedAt: e.now(),
		CurrentNodeID: def.Start.ID(),
	}
	x := e.newExec(ctx, r, inv.Modules, inv.Observer, inv.WorkspaceID)
	x.sessionID = inv.SessionID
	x.obs.RunStarted(r.ID)
	if inputErr != nil {
		x.finish(x.fail(x.top(def), def.Start.ID(), string(flow.TypeStart), "input: "+inputErr.Error()))
		return x.res
	}
	x.finish(x.walk(x.top(def), def.Start.ID()))
	return x.res
}

// Continue answers the question run waits at: input.text is saved under the
// question's save_as (as a string) and the run goes on from its next; in a
// chat run, c.Message (when set) first becomes vars.message. A chat run
// waiting at a delay goes on from the delay's next when c.Wake says the
// delay is over. def is the run's own version. A run that is not waiting
// gives ErrNotWaiting; a customer's answer to a run waiting at a delay
// ErrWaitingAtDelay, a wake of one waiting at a question
// ErrWaitingAtQuestion, and a run whose current node is neither of def an
// error; none of them changes the run.
func (e *Engine) Continue(ctx context.Context, def *flow.Definition, r *Run, c Continuation) (*Result, error) {
	if r.Status != StatusWaiting {
		return nil, ErrNotWaiting
	}
	var q *flow.Question
	var d *flow.Delay
	switch n := def.Node(r.CurrentNodeID).(type) {
	case *flow.Question:
		if c.Wake {
			return nil, ErrWaitingAtQuestion
		}
		q = n
	case *flow.Delay:
		if !c.Wake {
			return nil, ErrWaitingAtDelay
		}
		d = n
	default:
		return nil, fmt.Errorf("run %s waits at %q, which is not a question or delay of version %d", r.ID, r.CurrentNodeID, r.Version)
	}
	if r.Vars == nil {
		r.Vars = map[string]any{}
	}
	r.Status = StatusRunning
	x := e.newExec(ctx, r, c.Modules, c.Observer, r.WorkspaceID)
	x.sessionID = r.SessionID
	x.obs.RunStarted(r.ID)
	sc := x.top(def)
	if d != nil {
		x.finish(x.wake(sc, d))
		return x.res, nil
	}
	text := c.Text
	if r.Chat != nil && c.Message != nil {
		if text == "" {
			text = c.Message.Text
		}
		// The answer is the conversation's current message from now on,
		// for the nodes after the question as for the next call.
		if err := x.setVar(sc, "message", messageVar(*c.Message)); err != nil {
			x.finish(x.fail(sc, q.ID(), string(q.Type()), err.Error()))
			return x.res, nil
		}
	}
	x.finish(x.answer(sc, q, text))
	return x.res, nil
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Engine) budget() Budget {
	b := e.Budget
	if b.Time <= 0 {
		b.Time = DefaultBudget.Time
	}
	if b.Nodes <= 0 {
		b.Nodes = DefaultBudget.Nodes
	}
	if b.Output <= 0 {
		b.Output = DefaultBudget.Output
	}
	return b
}

// exec is one call's execution.
type exec struct {
	e         *Engine
	ctx       context.Context
	run       *Run
	res       *Result
	obs       Observer
	modules   Modules
	workspace string
	sessionID string
	budget    Budget
	deadline  time.Time
	// output is what the run's messages, and its output once it ends,
	// take as JSON: at most budget.Output.
	output int
}

func (e *Engine) newExec(ctx context.Context, r *Run, m Modules, obs Observer, ws string) *exec {
	if obs == nil {
		obs = NopObserver{}
	}
	b := e.budget()
	x := &exec{
		e: e, ctx: ctx, run: r, res: &Result{Run: r}, obs: obs, modules: m, workspace: ws,
		budget: b, deadline: e.now().Add(b.Time),
	}
	// A continued run's earlier messages count: the budget is the run's.
	for _, msg := range r.Messages {
		x.output += encodedSize(msg)
	}
	return x
}

// scope is the variables and place of one flow being run: the run's own
// flow, or a called flow (with its own vars, {input}).
type scope struct {
	def    *flow.Definition
	vars   map[string]any
	prefix string // trace id prefix of a called flow's nodes ("call/")
	depth  int
	inBody int
	top    bool
}

func (x *exec) top(def *flow.Definition) *scope {
	return &scope{def: def, vars: x.run.Vars, top: true}
}

// outcome is how a walk ended.
type outcome struct {
	kind   outcomeKind
	output map[string]any
	err    *Error
}

type outcomeKind int

const (
	fellThrough outcomeKind = iota // a node without next
	ended                          // an end node
	waiting
	failed
)

func (x *exec) finish(o outcome) {
	r := x.run
	if o.kind != waiting {
		r.WakeAt = nil
	}
	switch o.kind {
	case waiting:
		r.Status = StatusWaiting
		r.SessionID = x.sessionID
		return
	case failed:
		r.Status = StatusFailed
		r.Error = &Error{Code: o.err.Code, Message: truncate(o.err.Message, MaxErrorBytes)}
	default:
		r.Status = StatusCompleted
		r.Output = o.output
		if r.Output == nil {
			r.Output = map[string]any{}
		}
	}
	now := x.e.now()
	r.CompletedAt = &now
}

// stepResult is what one node did.
type stepResult struct {
	next   string
	input  any
	output any
	// stop ends the walk (end, waiting, failure).
	stop *outcome
	// nodeErr is the trace's error for a node that failed.
	nodeErr string
	// tokens and costUSD are what an AI node's provider calls consumed.
	tokens  int
	costUSD float64
}

func (x *exec) walk(sc *scope, id string) outcome {
	for id != "" {
		node := sc.def.Node(id)
		if node == nil {
			return x.fail(sc, id, "internal", fmt.Sprintf("no node %q", id))
		}
		if o, stopped := x.checkBudget(sc, node); stopped {
			return o
		}
		res := x.runNode(sc, node, func() stepResult { return x.step(sc, node) })
		if res.stop != nil {
			return *res.stop
		}
		id = res.next
	}
	return outcome{kind: fellThrough}
}

// runNode records one node: NodeStarted, the step, its NodeRun, NodeEnded.
func (x *exec) runNode(sc *scope, node flow.Node, step func() stepResult) stepResult {
	traceID := sc.prefix + node.ID()
	started := x.e.now()
	x.run.NodesExecuted++
	if sc.top {
		x.run.CurrentNodeID = node.ID()
	}
	i := len(x.res.NodeRuns)
	x.res.NodeRuns = append(x.res.NodeRuns, NodeRun{NodeID: traceID, NodeType: string(node.Type()), StartedAt: started})
	x.obs.NodeStarted(traceID, node.Type())
	res := step()
	nr := &x.res.NodeRuns[i]
	nr.DurationMS = x.e.now().Sub(started).Milliseconds()
	nr.Input, nr.Output, nr.Error = x.traced(res.input), x.traced(res.output), res.nodeErr
	nr.Tokens, nr.CostUSD = res.tokens, res.costUSD
	if res.stop != nil && res.stop.kind == failed && nr.Error == "" {
		nr.Error = res.stop.err.Message
	}
	nr.Error = truncate(nr.Error, MaxErrorBytes)
	x.obs.NodeEnded(*nr)
	return res
}

// traced is v as the trace records it: v itself while the run's trace,
// with it, stays within the output budget, else Truncated. Either way the
// trace holds no more than the budget of what the flow built, however
// many nodes record big values (a loop over a variable of 4 MiB).
func (x *exec) traced(v any) any {
	if v == nil {
		return nil
	}
	size := encodedSize(v)
	if size > x.budget.Output-x.run.TraceBytes {
		v = Truncated(size)
		size = encodedSize(v)
	}
	x.run.TraceBytes += size
	return v
}

// encodedSize is the length of v's JSON encoding, which is how the run
// stores it and the answer carries it. A value without one (none of the
// engine's values) counts as too large to keep.
func encodedSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return math.MaxInt32
	}
	return len(b)
}

// checkBudget stops the run before node when the node count or the time is
// spent; the node is recorded as not run (no duration) so a stream can show
// a synthetic start and end for it.
func (x *exec) checkBudget(sc *scope, node flow.Node) (outcome, bool) {
	var why string
	switch {
	case x.run.NodesExecuted >= x.budget.Nodes:
		why = fmt.Sprintf("the run reached its budget of %d nodes", x.budget.Nodes)
	case !x.e.now().Before(x.deadline):
		why = fmt.Sprintf("the run reached its time budget of %s", x.budget.Time)
	case x.ctx.Err() != nil:
		o := x.fail(sc, node.ID(), string(node.Type()), "run canceled: "+context.Cause(x.ctx).Error())
		x.recordNotRun(sc, node, o.err.Message)
		return o, true
	default:
		return outcome{}, false
	}
	msg := fmt.Sprintf("%s; node %q was not run", why, sc.prefix+node.ID())
	x.recordNotRun(sc, node, CodeBudgetExceeded+": "+why)
	return outcome{kind: failed, err: &Error{Code: CodeBudgetExceeded, Message: msg}}, true
}

func (x *exec) recordNotRun(sc *scope, node flow.Node, nodeErr string) {
	nr := NodeRun{NodeID: sc.prefix + node.ID(), NodeType: string(node.Type()), StartedAt: x.e.now(), Error: nodeErr}
	x.res.NodeRuns = append(x.res.NodeRuns, nr)
	x.obs.NodeStarted(nr.NodeID, node.Type())
	x.obs.NodeEnded(nr)
}

func (x *exec) fail(sc *scope, id, typ, msg string) outcome {
	return outcome{kind: failed, err: &Error{Code: CodeNodeFailed, Message: fmt.Sprintf("node %q (%s): %s", sc.prefix+id, typ, msg)}}
}

// failStep is a node failure: the run fails with node_failed.
func (x *exec) failStep(sc *scope, node flow.Node, format string, args ...any) stepResult {
	msg := fmt.Sprintf(format, args...)
	o := x.fail(sc, node.ID(), string(node.Type()), msg)
	return stepResult{stop: &o, nodeErr: msg}
}

// timeLeft is what remains of the time budget.
func (x *exec) timeLeft() time.Duration { return x.deadline.Sub(x.e.now()) }

// portCtx bounds a port call by its own limit and by what is left of the
// budget; budgetBound tells which of the two is the tighter.
func (x *exec) portCtx(limit time.Duration) (ctx context.Context, cancel context.CancelFunc, budgetBound bool, d time.Duration) {
	left := x.timeLeft()
	d = limit
	if left <= limit {
		d, budgetBound = left, true
	}
	if d < 0 {
		d = 0
	}
	ctx, cancel = context.WithTimeout(x.ctx, d)
	return ctx, cancel, budgetBound, d
}

// budgetStop is the failure of a node interrupted by the time budget.
func (x *exec) budgetStop(sc *scope, node flow.Node) stepResult {
	return x.stopped(sc, node, fmt.Sprintf("the run reached its time budget of %s", x.budget.Time))
}

// outputStop is the failure of a node whose message or output would take
// the run past its output budget: it is neither sent nor kept.
func (x *exec) outputStop(sc *scope, node flow.Node) stepResult {
	return x.stopped(sc, node, fmt.Sprintf("the run's messages and output would pass its budget of %s (RUN_OUTPUT_LIMIT)",
		bytesize.Size(x.budget.Output)))
}

// stopped is the failure of a node the budget stopped, why saying which
// part of it.
func (x *exec) stopped(sc *scope, node flow.Node, why string) stepResult {
	o := outcome{kind: failed, err: &Error{Code: CodeBudgetExceeded, Message: fmt.Sprintf("%s; node %q was stopped", why, sc.prefix+node.ID())}}
	return stepResult{stop: &o, nodeErr: CodeBudgetExceeded + ": " + why}
}

// takeOutput counts size bytes of messages or output into the run's
// output budget, unless they would pass it.
func (x *exec) takeOutput(size int) bool {
	if size > x.budget.Output-x.output {
		return false
	}
	x.output += size
	return true
}

// interrupted reports whether a port call's failure came from the run's
// time budget (rather than the node's own limit or the port).
func (x *exec) interrupted(ctx context.Context, budgetBound bool) bool {
	return x.ctx.Err() == nil && (x.timeLeft() <= 0 || (budgetBound && errors.Is(ctx.Err(), context.DeadlineExceeded)))
}

func (x *exec) step(sc *scope, node flow.Node) stepResult {
	switch n := node.(type) {
	case *flow.Start:
		return stepResult{next: n.Next}
	case *flow.SendMessage:
		return x.sendMessage(sc, n)
	case *flow.Question:
		return x.question(sc, n)
	case *flow.Condition:
		return x.condition(sc, n)
	case *flow.Variable:
		return x.variable(sc, n)
	case *flow.HTTP:
		return x.http(sc, n, n)
	case *flow.Loop:
		return x.loop(sc, n)
	case *flow.CallFlow:
		return x.callFlow(sc, n)
	case *flow.Script:
		return x.script(sc, n)
	case *flow.End:
		return x.end(sc, n)
	case *flow.Action:
		switch n.Kind {
		case flow.ActionSetVariable:
			v, err := x.assign(sc, *n.SetVariable)
			if err != nil {
				return x.failStep(sc, n, "%s", err)
			}
			return stepResult{next: n.Next, output: map[string]any{n.SetVariable.Name: v}}
		case flow.ActionWebhookCall:
			return x.http(sc, n, n.Webhook)
		}
		if x.run.Chat != nil {
			return x.unsupported(sc, n)
		}
		return x.failStep(sc, n, "action %q cannot run in a headless run", n.Kind)
	case *flow.LLM:
		return x.llm(sc, n)
	case *flow.Intent:
		return x.intent(sc, n)
	case *flow.Extract:
		return x.extract(sc, n)
	case *flow.Knowledge:
		return x.knowledge(sc, n)
	}
	if x.run.Chat == nil {
		return x.failStep(sc, node, "a chat-only node cannot run in a headless run")
	}
	return x.chatStep(sc, node)
}

// renderer renders templates over vars, keeping the first error, so that a
// message's many fields read as one list.
type renderer struct {
	vars map[string]any
	err  error
	// left is what the texts may still take together when over is set;
	// past it the renderer stops with over as its error, so that a node of
	// a thousand fields of 1 MiB each never builds them all.
	left int
	over error
}

// errOutputBudget is a message that would take the run past its output
// budget.
var errOutputBudget = errors.New("output budget spent")

// MaxRequestHeadBytes bounds an http node's URL and header values
// together, as rendered.
const MaxRequestHeadBytes = 1 << 20

// errRequestHead is an http node's URL and headers past
// MaxRequestHeadBytes.
var errRequestHead = fmt.Errorf("the url and headers would pass %s", bytesize.Size(MaxRequestHeadBytes))

func (r *renderer) text(t *flow.Template) string {
	if t == nil || r.err != nil {
		return ""
	}
	s, err := t.RenderString(r.vars)
	if err != nil {
		r.err = err
		return ""
	}
	if r.over != nil {
		if r.left -= len(s); r.left < 0 {
			r.err = r.over
			return ""
		}
	}
	return s
}

func (r *renderer) texts(ts []*flow.Template) []string {
	var out []string
	for _, t := range ts {
		out = append(out, r.text(t))
	}
	return out
}

func (r *renderer) buttons(bs []flow.Button) []Button {
	var out []Button
	for _, b := range bs {
		out = append(out, Button{Type: b.Type, Title: r.text(b.Title), URL: r.text(b.URL), Payload: r.text(b.Payload)})
	}
	return out
}

func render(t *flow.Template, vars map[string]any) (string, error) {
	r := renderer{vars: vars}
	s := r.text(t)
	return s, r.err
}

// emit sends m, node's message, when the run's output budget has room for
// it, and says whether it did; a message that would pass the budget is not
// sent. In a chat run the message is also the call's next ActionSend.
func (x *exec) emit(sc *scope, node flow.Node, m Message) bool {
	if !x.takeOutput(encodedSize(m)) {
		return false
	}
	x.run.Messages = append(x.run.Messages, m)
	x.res.Messages = append(x.res.Messages, m)
	if x.run.Chat != nil {
		sent := m
		x.act(Action{Kind: ActionSend, NodeID: sc.prefix + node.ID(), Message: &sent})
	}
	x.obs.Message(m)
	return true
}

// messageRenderer renders a message's texts within what is left of the
// output budget.
func (x *exec) messageRenderer(vars map[string]any) renderer {
	return renderer{vars: vars, left: x.budget.Output - x.output, over: errOutputBudget}
}

func (x *exec) sendMessage(sc *scope, n *flow.SendMessage) stepResult {
	m, err := renderMessage(n.Message, x.messageRenderer(sc.vars))
	if errors.Is(err, errOutputBudget) {
		return x.outputStop(sc, n)
	}
	if err != nil {
		return x.failStep(sc, n, "%s", err)
	}
	if !x.emit(sc, n, m) {
		return x.outputStop(sc, n)
	}
	return stepResult{next: n.Next, output: m}
}

func renderMessage(spec flow.Message, r renderer) (Message, error) {
	m := Message{Type: spec.Type, Text: r.text(spec.Text), QuickReplies: r.texts(spec.QuickReplies), Buttons: r.buttons(spec.Buttons)}
	for _, c := range spec.Cards {
		m.Cards = append(m.Cards, Card{Title: r.text(c.Title), Subtitle: r.text(c.Subtitle), ImageURL: r.text(c.ImageURL), Buttons: r.buttons(c.Buttons)})
	}
	return m, r.err
}

func (x *exec) question(sc *scope, n *flow.Question) stepResult {
	if !sc.top {
		return x.failStep(sc, n, "a called flow cannot wait for an answer")
	}
	if sc.inBody > 0 {
		// A wait would have to resume the loop's iteration; headless runs
		// ask their questions outside loops.
		return x.failStep(sc, n, "a question inside a loop body cannot wait for an answer")
	}
	r := x.messageRenderer(sc.vars)
	m := Message{Type: flow.MessageText, Text: r.text(n.Text), QuickReplies: r.texts(n.QuickReplies)}
	if errors.Is(r.err, errOutputBudget) {
		return x.outputStop(sc, n)
	}
	if r.err != nil {
		return x.failStep(sc, n, "%s", r.err)
	}
	if len(m.QuickReplies) > 0 {
		m.Type = flow.MessageQuickReplies
	}
	if !x.emit(sc, n, m) {
		return x.outputStop(sc, n)
	}
	return stepResult{output: m, stop: &outcome{kind: waiting}}
}

// answer runs the continue of a question: one node run recording the answer,
// then the walk from the question's next.
func (x *exec) answer(sc *scope, q *flow.Question, text string) outcome {
	if o, stopped := x.checkBudget(sc, q); stopped {
		return o
	}
	res := x.runNode(sc, q, func() stepResult {
		if q.SaveAs != "" {
			if err := x.setVar(sc, q.SaveAs, text); err != nil {
				return x.failStep(sc, q, "%s", err)
			}
		}
		return stepResult{next: q.Next, input: map[string]any{"text": text}}
	})
	if res.stop != nil {
		return *res.stop
	}
	return x.walk(sc, res.next)
}

func (x *exec) condition(sc *scope, n *flow.Condition) stepResult {
	if n.If != nil {
		ok, err := n.If.EvalBool(sc.vars)
		if err != nil {
			return x.failStep(sc, n, "if: %s", err)
		}
		if ok {
			return stepResult{next: n.Then, output: map[string]any{"branch": "then"}}
		}
		return stepResult{next: n.Else, output: map[string]any{"branch": "else"}}
	}
	for i, c := range n.Cases {
		ok, err := c.If.EvalBool(sc.vars)
		if err != nil {
			return x.failStep(sc, n, "cases[%d].if: %s", i, err)
		}
		if ok {
			return stepResult{next: c.Next, output: map[string]any{"branch": fmt.Sprintf("cases[%d]", i)}}
		}
	}
	return stepResult{next: n.Else, output: map[string]any{"branch": "else"}}
}

func (x *exec) assign(sc *scope, a flow.Assignment) (any, error) {
	var v any
	var err error
	switch {
	case a.Expr != nil:
		v, err = a.Expr.Eval(sc.vars)
	case a.Value != nil:
		v, err = a.Value.Render(sc.vars)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.Name, err)
	}
	if err := x.setVar(sc, a.Name, v); err != nil {
		return nil, err
	}
	return v, nil
}

func (x *exec) variable(sc *scope, n *flow.Variable) stepResult {
	out := map[string]any{}
	if n.Op == "" {
		for _, a := range n.Set {
			v, err := x.assign(sc, a)
			if err != nil {
				return x.failStep(sc, n, "set: %s", err)
			}
			out[a.Name] = v
		}
		return stepResult{next: n.Next, output: out}
	}
	name := n.Target.Name
	var operand any
	if n.Target.Expr != nil || n.Target.Value != nil {
		var err error
		if n.Target.Expr != nil {
			operand, err = n.Target.Expr.Eval(sc.vars)
		} else {
			operand, err = n.Target.Value.Render(sc.vars)
		}
		if err != nil {
			return x.failStep(sc, n, "value: %s", err)
		}
	}
	cur, has := sc.vars[name]
	var v any
	switch n.Op {
	case flow.OpSet:
		v = operand
	case flow.OpIncrement, flow.OpDecrement:
		by := 1.0
		if operand != nil {
			f, ok := operand.(float64)
			if !ok {
				return x.failStep(sc, n, "value: %T is not a number", operand)
			}
			by = f
		}
		c := 0.0
		if has && cur != nil {
			f, ok := cur.(float64)
			if !ok {
				return x.failStep(sc, n, "vars.%s is %s, not a number", name, kind(cur))
			}
			c = f
		}
		if n.Op == flow.OpDecrement {
			by = -by
		}
		v = c + by
	case flow.OpAppend:
		list, ok := asList(cur)
		if !ok {
			return x.failStep(sc, n, "vars.%s is %s, not a list", name, kind(cur))
		}
		v = append(append([]any{}, list...), operand)
	case flow.OpRemove:
		list, ok := asList(cur)
		if !ok {
			return x.failStep(sc, n, "vars.%s is %s, not a list", name, kind(cur))
		}
		kept := []any{}
		for _, e := range list {
			if !jsonEqual(e, operand) {
				kept = append(kept, e)
			}
		}
		v = kept
	case flow.OpClear:
		delete(sc.vars, name)
		return stepResult{next: n.Next, output: map[string]any{name: nil}}
	}
	if err := x.setVar(sc, name, v); err != nil {
		return x.failStep(sc, n, "%s", err)
	}
	out[name] = v
	return stepResult{next: n.Next, output: out}
}

func asList(v any) ([]any, bool) {
	if v == nil {
		return nil, true
	}
	l, ok := v.([]any)
	return l, ok
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func jsonEqual(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// setVar writes one variable, keeping the run's variables within
// MaxVarsBytes.
func (x *exec) setVar(sc *scope, name string, v any) error {
	v, err := expression.Normalize(v, expression.MaxStringBytes)
	if err != nil {
		return fmt.Errorf("vars.%s: %w", name, err)
	}
	old, had := sc.vars[name]
	sc.vars[name] = v
	if _, err := expression.Normalize(sc.vars, MaxVarsBytes); err != nil {
		if had {
			sc.vars[name] = old
		} else {
			delete(sc.vars, name)
		}
		return fmt.Errorf("vars would pass %d bytes", MaxVarsBytes)
	}
	return nil
}

func (x *exec) http(sc *scope, node flow.Node, n *flow.HTTP) stepResult {
	head := renderer{vars: sc.vars, left: MaxRequestHeadBytes, over: errRequestHead}
	url := head.text(n.URL)
	if head.err != nil {
		return x.failStep(sc, node, "url: %s", head.err)
	}
	req := HTTPRequest{Method: n.Method, URL: url, Headers: map[string]string{}, Timeout: n.Timeout}
	for _, h := range n.Headers {
		v := head.text(h.Value)
		if head.err != nil {
			return x.failStep(sc, node, "headers.%s: %s", h.Name, head.err)
		}
		req.Headers[h.Name] = v
	}
	var bodyShown any
	if n.Body != nil {
		body, err := n.Body.Render(sc.vars)
		if err != nil {
			return x.failStep(sc, node, "body: %s", err)
		}
		bodyShown = body
		if s, ok := body.(string); ok && n.Body.IsString() {
			req.Body = []byte(s)
		} else {
			req.Body, _ = json.Marshal(body)
			if !hasHeader(req.Headers, "Content-Type") {
				req.Headers["Content-Type"] = "application/json"
			}
		}
	}
	input := map[string]any{"method": req.Method, "url": req.URL}
	if len(req.Headers) > 0 {
		input["headers"] = redacted(req.Headers)
	}
	if bodyShown != nil {
		input["body"] = bodyShown
	}
	if x.e.HTTP == nil {
		return x.failStep(sc, node, "no HTTP caller is configured")
	}
	ctx, cancel, budgetBound, d := x.portCtx(n.Timeout)
	req.Timeout = d
	resp, err := x.e.HTTP.Call(ctx, req)
	cancel()
	if err != nil {
		if x.interrupted(ctx, budgetBound) {
			r := x.budgetStop(sc, node)
			r.input = input
			return r
		}
		if x.ctx.Err() != nil {
			r := x.failStep(sc, node, "run canceled: %s", context.Cause(x.ctx))
			r.input = input
			return r
		}
		saved := map[string]any{"status": float64(0), "headers": map[string]any{}, "body": nil, "error": err.Error()}
		return x.httpFailed(sc, node, n, input, saved, fmt.Sprintf("request failed: %s", err))
	}
	saved, err := responseValue(resp)
	if err != nil {
		return x.httpFailed(sc, node, n, input, nil, err.Error())
	}
	if resp.Status < 200 || resp.Status > 299 {
		return x.httpFailed(sc, node, n, input, saved, fmt.Sprintf("status %d", resp.Status))
	}
	if n.SaveAs != "" {
		if err := x.setVar(sc, n.SaveAs, saved); err != nil {
			r := x.failStep(sc, node, "%s", err)
			r.input = input
			return r
		}
	}
	return stepResult{next: n.Next, input: input, output: saved}
}

// httpFailed takes on_error when set, with what there is of the response
// saved (a transport error saves status 0 and its error); else the node
// fails.
func (x *exec) httpFailed(sc *scope, node flow.Node, n *flow.HTTP, input, saved map[string]any, why string) stepResult {
	if n.OnError == "" {
		r := x.failStep(sc, node, "%s", why)
		r.input, r.output = input, saved
		return r
	}
	if n.SaveAs != "" && saved != nil {
		if err := x.setVar(sc, n.SaveAs, saved); err != nil {
			r := x.failStep(sc, node, "%s", err)
			r.input = input
			return r
		}
	}
	return stepResult{next: n.OnError, input: input, output: saved, nodeErr: why}
}

// redacted is the headers as the trace shows them: the values of those that
// usually carry credentials are hidden, since traces are read back over the
// API and kept.
func redacted(h map[string]string) map[string]any {
	out := make(map[string]any, len(h))
	for k, v := range h {
		l := strings.ToLower(k)
		if l == "authorization" || l == "proxy-authorization" || l == "cookie" ||
			strings.Contains(l, "token") || strings.Contains(l, "secret") || strings.Contains(l, "key") {
			v = "[redacted]"
		}
		out[k] = v
	}
	return out
}

func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// responseValue is what save_as receives: {status, headers, body}, headers
// with lower-case names, the body parsed when the response says it is JSON.
func responseValue(resp HTTPResponse) (map[string]any, error) {
	if len(resp.Body) > MaxResponseBytes {
		return nil, fmt.Errorf("response body larger than %d bytes", MaxResponseBytes)
	}
	headers := map[string]any{}
	isJSON := false
	for k, v := range resp.Headers {
		k = strings.ToLower(k)
		headers[k] = v
		if k == "content-type" && strings.Contains(strings.ToLower(v), "json") {
			isJSON = true
		}
	}
	var body any = string(resp.Body)
	if isJSON && len(resp.Body) > 0 {
		var parsed any
		if err := json.Unmarshal(resp.Body, &parsed); err == nil {
			body = parsed
		}
	}
	if len(resp.Body) == 0 {
		body = nil
	}
	return map[string]any{"status": float64(resp.Status), "headers": headers, "body": body}, nil
}

func (x *exec) loop(sc *scope, n *flow.Loop) stepResult {
	over, err := n.Over.Eval(sc.vars)
	if err != nil {
		return x.failStep(sc, n, "over: %s", err)
	}
	items, ok := asList(over)
	if !ok {
		return x.failStep(sc, n, "over is %s, not a list", kind(over))
	}
	count := len(items)
	truncated := count > n.MaxIterations
	if truncated {
		count = n.MaxIterations
	}
	prev, had := sc.vars[n.As]
	body := *sc
	body.inBody++
	for i := 0; i < count; i++ {
		sc.vars[n.As] = items[i]
		o := x.walk(&body, n.Body)
		if o.kind != fellThrough {
			return stepResult{stop: &o, output: map[string]any{"iterations": float64(i + 1)}}
		}
	}
	// The item variable is the loop's own: what it shadowed comes back.
	if had {
		sc.vars[n.As] = prev
	} else {
		delete(sc.vars, n.As)
	}
	return stepResult{next: n.Next, output: map[string]any{"iterations": float64(count), "truncated": truncated}}
}

func (x *exec) callFlow(sc *scope, n *flow.CallFlow) stepResult {
	if sc.depth+1 > MaxCallDepth {
		return x.failStep(sc, n, "call_flow nested deeper than %d", MaxCallDepth)
	}
	if x.e.Flows == nil {
		return x.failStep(sc, n, "no flow loader is configured")
	}
	child, err := x.e.Flows.Load(x.ctx, x.workspace, n.FlowID)
	if err != nil {
		if errors.Is(err, ErrFlowNotFound) {
			return x.failStep(sc, n, "flow %q is not an active flow of this workspace", n.FlowID)
		}
		return x.failStep(sc, n, "load flow %q: %s", n.FlowID, err)
	}
	if ni := child.NotInvokable(); ni != nil {
		return x.failStep(sc, n, "flow %q: %s", n.FlowID, ni)
	}
	if w := child.Waits(); w != nil {
		return x.failStep(sc, n, "flow %q: node %q (%s) waits; a called flow may not", n.FlowID, w.ID(), w.Type())
	}
	input := map[string]any{}
	if n.Input != nil {
		v, err := n.Input.Render(sc.vars)
		if err != nil {
			return x.failStep(sc, n, "input: %s", err)
		}
		input, _ = v.(map[string]any)
	}
	cs := &scope{def: child, vars: map[string]any{"input": input}, prefix: sc.prefix + n.ID() + "/", depth: sc.depth + 1}
	o := x.walk(cs, child.Start.ID())
	switch o.kind {
	case failed:
		return stepResult{input: input, stop: &o}
	case waiting:
		f := x.fail(sc, n.ID(), string(n.Type()), "the called flow waited")
		return stepResult{input: input, stop: &f}
	}
	out := o.output
	if out == nil {
		out = map[string]any{}
	}
	if n.SaveAs != "" {
		if err := x.setVar(sc, n.SaveAs, out); err != nil {
			return x.failStep(sc, n, "%s", err)
		}
	}
	return stepResult{next: n.Next, input: input, output: out}
}

func (x *exec) script(sc *scope, n *flow.Script) stepResult {
	if !x.modules.FlowScript {
		o := outcome{kind: failed, err: &Error{Code: CodeModuleInactive, Message: fmt.Sprintf("node %q (script) needs the flow_script module", sc.prefix+n.ID())}}
		return stepResult{stop: &o, nodeErr: NodeErrScriptModuleInactive}
	}
	if x.e.Scripts == nil {
		return x.failStep(sc, n, "no script sandbox is configured")
	}
	limit := x.e.ScriptLimit
	if limit <= 0 {
		limit = 10 * time.Second
	}
	vars, err := expression.Normalize(sc.vars, MaxVarsBytes)
	if err != nil {
		return x.failStep(sc, n, "vars: %s", err)
	}
	ctx, cancel, budgetBound, d := x.portCtx(limit)
	v, err := x.e.Scripts.Run(ctx, n.Code, vars.(map[string]any), d)
	cancel()
	if err != nil {
		if x.interrupted(ctx, budgetBound) {
			return x.budgetStop(sc, n)
		}
		return x.failStep(sc, n, "script: %s", err)
	}
	if n.SaveAs != "" {
		if err := x.setVar(sc, n.SaveAs, v); err != nil {
			return x.failStep(sc, n, "%s", err)
		}
	}
	out, _ := expression.Normalize(v, expression.MaxStringBytes)
	return stepResult{next: n.Next, output: out}
}

func (x *exec) end(sc *scope, n *flow.End) stepResult {
	out := map[string]any{}
	if n.Output != nil {
		v, err := n.Output.Render(sc.vars)
		if err != nil {
			return x.failStep(sc, n, "output: %s", err)
		}
		out, _ = v.(map[string]any)
	}
	// The run's own output counts with its messages; a called flow's is a
	// value of its caller's (its variables, its trace).
	if sc.top && !x.takeOutput(encodedSize(out)) {
		return x.outputStop(sc, n)
	}
	return stepResult{output: out, stop: &outcome{kind: ended, output: out}}
}
