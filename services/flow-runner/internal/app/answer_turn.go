package app

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// errAnswered is a turn answered before: a redelivery, acked as it is.
var errAnswered = errors.New("turn answered before")

// chatRunIDs names a turn's run after the turn, so that a turn answered
// again (its process died before storing the answer) runs under the same
// id, and its sends, keyed by it, reach the customer once.
var chatRunIDs = uuid.MustParse("6f1c8a2e-3b7d-4c59-9e0a-5d2f8b41c7e3")

// AnswerTurn answers one customer message on an auto or suggest channel
// (docs/chat.md "Who answers a customer message"): it starts a chat run,
// or continues the one waiting at a question in the conversation, and
// carries out what the run did (its messages sent or drafted, the
// conversation handed over, tagged, assigned), while holding the
// conversation, so that its turns are answered one at a time, in order,
// and each once. It answers nil for a turn answered before; ErrTurnEarly
// for one whose predecessor is not answered yet; *WaitingAtDelay while the
// conversation's run waits at a delay node; catalog.ErrConversationBusy
// while another instance answers the conversation; any other error is
// transient, and the turn must be answered again later (nothing of it is
// stored, and its sends, keyed, are not repeated).
func (a *App) AnswerTurn(ctx context.Context, t Turn) error {
	err := a.chats.Hold(ctx, t.WorkspaceID, t.ConversationID, t.Chat.ChannelID, func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
		switch {
		case t.Seq <= c.AnsweredSeq:
			return nil, errAnswered
		case t.Seq > c.AnsweredSeq+1 && a.now().Sub(later(t.CreatedAt, c.MovedAt)) < a.chatGapWait:
			return nil, ErrTurnEarly
		}
		if until, ok := c.Waiting.Wake(); ok {
			return nil, &WaitingAtDelay{Until: until}
		}
		c.AnsweredSeq, c.Mode = t.Seq, t.Mode
		return a.answer(ctx, c, t)
	})
	a.obs.ChatTurn(turnOutcome(err))
	if errors.Is(err, errAnswered) {
		return nil
	}
	return err
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Outcomes of handling a chat turn (Observer.ChatTurn).
const (
	ChatTurnAnswered  = "answered"
	ChatTurnRepeated  = "answered_before"
	ChatTurnEarly     = "early"
	ChatTurnBusy      = "busy"
	ChatTurnAtDelay   = "behind_delay"
	ChatTurnTransient = "failed"
)

// turnOutcome names what AnswerTurn's err says of the turn.
func turnOutcome(err error) string {
	switch {
	case err == nil:
		return ChatTurnAnswered
	case errors.Is(err, errAnswered):
		return ChatTurnRepeated
	case errors.Is(err, ErrTurnEarly):
		return ChatTurnEarly
	case errors.Is(err, catalog.ErrConversationBusy):
		return ChatTurnBusy
	case errors.As(err, new(*WaitingAtDelay)):
		return ChatTurnAtDelay
	}
	return ChatTurnTransient
}

// answer runs the turn's chat run within the plan's AI replies.
func (a *App) answer(ctx context.Context, c *catalog.ChatConversation, t Turn) (*catalog.ChatRun, error) {
	ws, err := a.workspaces.Workspace(ctx, t.WorkspaceID)
	if err != nil {
		return nil, fmt.Errorf("read workspace: %w", err)
	}
	if ws.AIUsed >= ws.AILimit {
		return nil, a.unanswered(ctx, c, UnansweredAILimitReached)
	}
	t.Chat.WorkspaceName = ws.Name
	modules := ws.Plan.Modules
	if waiting := c.Waiting; waiting != nil {
		// The window is the message's: a turn answered late (a backlog,
		// an outage it waited out) still continues the run it was sent to.
		if t.CreatedAt.Sub(c.WaitingSince) <= a.chatSessionTTL {
			if waiting.Chat != nil {
				// Not stored with the run: its ai_response nodes are told
				// the workspace's name as it is now.
				waiting.Chat.WorkspaceName = ws.Name
			}
			return a.continueChat(ctx, c, waiting, ws.Plan, run.Continuation{Text: t.Message.Text, Message: &t.Message}, t.ID)
		}
		// Expired: the run stays stored as it was, and the message
		// starts a new one.
		c.Waiting = nil
	}
	def, flowID, version, err := a.chatFlow(ctx, c)
	if err != nil {
		return nil, err
	}
	if flowID == "" {
		// The assistant is the plan's AI replies, whatever its modules.
		modules.FlowAI = true
	}
	err = a.guardWired(ctx, def)
	switch {
	case err == nil && def.AINode() != nil && a.engine.LLM == nil:
		err = errors.New("no LLM provider is configured (LLM_BASE_URL)")
	case err != nil && a.guard != nil && !errors.Is(err, run.ErrGuardNotConfigured):
		// A guard configured but unreachable now: the turn waits for it
		// rather than go unanswered for an outage.
		return nil, err
	}
	if err != nil {
		a.obs.FlowRefused(t.WorkspaceID, err)
		return nil, a.unanswered(ctx, c, UnansweredAIUnavailable)
	}
	inv := run.Invocation{
		RunID: uuid.NewSHA1(chatRunIDs, []byte(t.ID)).String(), FlowID: flowID, Version: version,
		WorkspaceID: t.WorkspaceID, Modules: modules,
		Chat: &run.ChatInvocation{Chat: t.Chat, Message: t.Message},
	}
	var res *run.Result
	if flowID != "" && !ws.Plan.Flows {
		res = a.refused(inv, def, run.CodeModuleInactive, noFlowsModule)
	} else {
		began := a.now()
		res = a.engine.Invoke(ctx, def, inv)
		a.obs.RunCall(res.Run.Status, a.now().Sub(began))
	}
	if err := interrupted(ctx, res); err != nil {
		return nil, err
	}
	return a.settle(ctx, c, res, true, t.ID)
}

// refused is a chat run that could not start, failed with code: stored
// like any, so that operators see why the conversation was handed over.
func (a *App) refused(inv run.Invocation, def *flow.Definition, code, message string) *run.Result {
	now := a.now()
	return &run.Result{Run: &run.Run{
		ID: inv.RunID, FlowID: inv.FlowID, Version: inv.Version, WorkspaceID: inv.WorkspaceID,
		Status: run.StatusFailed, CurrentNodeID: def.Start.ID(), Vars: map[string]any{}, Output: map[string]any{},
		Error: &run.Error{Code: code, Message: message}, StartedAt: now, CompletedAt: &now, Chat: &inv.Chat.Chat,
	}}
}

// noFlowsModule is why a chat flow's run fails without the flows module.
const noFlowsModule = "the plan has no flows module, which chat flows need"

// continueChat goes on with the conversation's waiting run, with plan as
// it is now: a chat flow's run whose plan has lost the flows module since
// it began fails, as one that starts without it does.
func (a *App) continueChat(ctx context.Context, c *catalog.ChatConversation, r *run.Run, plan Plan, cont run.Continuation, key string) (*catalog.ChatRun, error) {
	if r.FlowID != "" && !plan.Flows {
		now := a.now()
		r.Status, r.Error, r.CompletedAt, r.WakeAt = run.StatusFailed, &run.Error{Code: run.CodeModuleInactive, Message: noFlowsModule}, &now, nil
		return a.settle(ctx, c, &run.Result{Run: r}, false, key)
	}
	modules := plan.Modules
	def := flow.Assistant()
	if r.FlowID != "" {
		v, err := a.flows.Version(ctx, r.FlowID, r.Version)
		if err != nil {
			return nil, fmt.Errorf("load version %d of flow %s: %w", r.Version, r.FlowID, err)
		}
		def = v.Definition
	} else {
		modules.FlowAI = true
	}
	// The plan's modules as they are now: a continue is given its own,
	// like an invoke.
	cont.Modules = modules
	began := a.now()
	res, err := a.engine.Continue(ctx, def, r, cont)
	if err != nil {
		return nil, fmt.Errorf("continue chat run %s: %w", r.ID, err)
	}
	a.obs.RunCall(res.Run.Status, a.now().Sub(began))
	if err := interrupted(ctx, res); err != nil {
		return nil, err
	}
	return a.settle(ctx, c, res, false, key)
}

// interrupted is why a call's run ended that was no fault of its flow: the
// instance stopping, or a platform service it needed down. The turn is then
// answered again later, by this instance or another, and nothing of this
// call is kept or carried out: handing the conversation over for an outage
// would silence the AI until an operator noticed.
func interrupted(ctx context.Context, res *run.Result) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if res.Unavailable != nil {
		return fmt.Errorf("chat run %s: %w", res.Run.ID, res.Unavailable)
	}
	return nil
}

// chatFlow is the flow that answers the turn's channel: its chat flow when
// one is assigned and still published, active and triggered by chat, the
// assistant (flowID "") otherwise. Hold read which, with its lock.
func (a *App) chatFlow(ctx context.Context, c *catalog.ChatConversation) (def *flow.Definition, flowID string, version int, err error) {
	flowID, version = c.ChatFlowID, c.ChatFlowVersion
	if flowID == "" {
		return flow.Assistant(), "", 0, nil
	}
	v, err := a.flows.Version(ctx, flowID, version)
	if err != nil {
		return nil, "", 0, fmt.Errorf("load chat flow %s: %w", flowID, err)
	}
	return v.Definition, flowID, version, nil
}

// settle carries out what the call did to the conversation, then hands
// the conversation over when the run failed (or marks it unanswered when
// the plan's AI replies ran out), and keeps the run waiting in the
// conversation when it waits. key names the call: its sends are keyed
// after it.
func (a *App) settle(ctx context.Context, c *catalog.ChatConversation, res *run.Result, isNew bool, key string) (*catalog.ChatRun, error) {
	r := res.Run
	failed := r.Status == run.StatusFailed && r.Error != nil
	nodeRuns := res.NodeRuns
	// A run refused an AI unit carries out nothing: at the plan's limit
	// nothing reaches the customer, also what the flow did before its AI
	// node (the workspace the turn started from may be a second old).
	if !failed || r.Error.Code != run.CodeQuotaExceeded {
		var err error
		if nodeRuns, err = a.carryOut(ctx, c, res, key); err != nil {
			return nil, err
		}
	}
	if failed {
		var err error
		if r.Error.Code == run.CodeQuotaExceeded {
			err = a.unanswered(ctx, c, UnansweredAILimitReached)
		} else {
			err = a.refusable(a.conversations.HandOver(ctx, c.WorkspaceID, c.ConversationID,
				"the chat run "+r.ID+" failed: "+r.Error.Code+": "+r.Error.Message))
		}
		if err != nil {
			return nil, err
		}
	}
	// A new waiting run, or none: the failed wakes were the old one's.
	c.Waiting, c.WakeTries, c.WakeRetryAt = nil, 0, time.Time{}
	if r.Status == run.StatusWaiting {
		c.Waiting, c.WaitingSince = r, a.now()
	}
	return &catalog.ChatRun{Run: r, New: isNew, NodeRuns: nodeRuns}, nil
}

// carryOut does the call's actions, in order: on an auto channel each
// message is sent; on a suggest channel they are drafted together, as
// the conversation's waiting suggestion, before the rest is done. A send
// or change messaging refuses for good is recorded on the run as a node
// run of type "send" with the refusal, and the call goes on.
func (a *App) carryOut(ctx context.Context, c *catalog.ChatConversation, res *run.Result, key string) ([]run.NodeRun, error) {
	r, nodeRuns := res.Run, res.NodeRuns
	refused := func(act run.Action, err error) {
		nodeRuns = append(nodeRuns, run.NodeRun{
			NodeID: act.NodeID, NodeType: "send", StartedAt: a.now(),
			Input: map[string]any{"action": string(act.Kind)}, Error: err.Error(),
		})
	}
	ws, conv := c.WorkspaceID, c.ConversationID
	if c.Mode == ModeSuggest {
		var drafts []run.Message
		var first run.Action
		for _, act := range res.Actions {
			if act.Kind == run.ActionSend {
				if drafts == nil {
					first = act
				}
				drafts = append(drafts, *act.Message)
			}
		}
		if drafts != nil {
			if err := a.conversations.Draft(ctx, ws, conv, key+"/draft", r.ID, drafts); err != nil {
				if !errors.Is(err, ErrSendRefused) {
					return nil, err
				}
				refused(first, err)
			}
		}
	}
	for i, act := range res.Actions {
		var err error
		switch act.Kind {
		case run.ActionSend:
			if c.Mode == ModeSuggest {
				continue
			}
			err = a.conversations.Send(ctx, ws, conv, key+"/"+strconv.Itoa(i), r.ID, *act.Message)
		case run.ActionHandover:
			err = a.conversations.HandOver(ctx, ws, conv, act.Reason)
		case run.ActionResumeAI:
			err = a.conversations.ResumeAI(ctx, ws, conv)
		case run.ActionTag:
			err = a.conversations.AddTags(ctx, ws, conv, act.Tags)
		case run.ActionAssign:
			err = a.conversations.Assign(ctx, ws, conv, act.Operator)
		}
		if errors.Is(err, ErrSendRefused) {
			refused(act, err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s of chat run %s: %w", act.Kind, r.ID, err)
		}
	}
	return nodeRuns, nil
}

// unanswered marks the conversation's customer message left without an
// answer, for operators to see.
func (a *App) unanswered(ctx context.Context, c *catalog.ChatConversation, reason string) error {
	return a.refusable(a.conversations.MarkUnanswered(ctx, c.WorkspaceID, c.ConversationID, reason))
}

// refusable passes a transient error on; a refusal is no failure of the
// turn.
func (a *App) refusable(err error) error {
	if errors.Is(err, ErrSendRefused) {
		return nil
	}
	return err
}

// wakeKey names a call that wakes a run from its delay: its sends are
// keyed after the run and the wake time.
func wakeKey(runID string, at time.Time) string {
	return runID + "/wake/" + strconv.FormatInt(at.UnixNano(), 10)
}
