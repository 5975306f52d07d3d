package adapters

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/parleyhq/parley/pkg/adminclient"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/recent"
	"github.com/parleyhq/parley/services/flow-runner/internal/app"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Conversations is the chat runs' way to the conversations, which
// messaging owns: its admin routes send and draft their messages and
// change the conversations' chat state (docs/chat.md).
type Conversations struct {
	services *adminclient.Client
}

var _ app.Conversations = (*Conversations)(nil)

// NewConversations returns the conversations, reached through services.
func NewConversations(services *adminclient.Client) *Conversations {
	return &Conversations{services: services}
}

// Send implements app.Conversations.
func (c *Conversations) Send(ctx context.Context, workspaceID, conversationID, key, runID string, m run.Message) error {
	_, err := c.services.SendAIMessage(ctx, conversationID, messagingapi.SendAIMessage{
		WorkspaceID: workspaceID, Key: key, RunID: runID, Message: outbound(m),
	})
	return refused("send", err)
}

// Draft implements app.Conversations.
func (c *Conversations) Draft(ctx context.Context, workspaceID, conversationID, key, runID string, ms []run.Message) error {
	d := messagingapi.DraftSuggestion{WorkspaceID: workspaceID, Key: key, RunID: runID, Messages: make([]messagingapi.OutboundMessage, len(ms))}
	for i, m := range ms {
		d.Messages[i] = outbound(m)
	}
	_, err := c.services.DraftSuggestion(ctx, conversationID, d)
	return refused("draft", err)
}

// HandOver implements app.Conversations.
func (c *Conversations) HandOver(ctx context.Context, workspaceID, conversationID, reason string) error {
	_, err := c.services.HandOver(ctx, workspaceID, conversationID, reason)
	return refused("hand over", err)
}

// ResumeAI implements app.Conversations.
func (c *Conversations) ResumeAI(ctx context.Context, workspaceID, conversationID string) error {
	_, err := c.services.ResumeAI(ctx, workspaceID, conversationID)
	return refused("resume the AI", err)
}

// AddTags implements app.Conversations.
func (c *Conversations) AddTags(ctx context.Context, workspaceID, conversationID string, tags []string) error {
	_, err := c.services.AddTags(ctx, workspaceID, conversationID, tags)
	return refused("tag", err)
}

// Assign implements app.Conversations.
func (c *Conversations) Assign(ctx context.Context, workspaceID, conversationID, operator string) error {
	_, err := c.services.Assign(ctx, workspaceID, conversationID, operator)
	return refused("assign", err)
}

// MarkUnanswered implements app.Conversations.
func (c *Conversations) MarkUnanswered(ctx context.Context, workspaceID, conversationID, reason string) error {
	_, err := c.services.MarkUnanswered(ctx, workspaceID, conversationID, reason)
	return refused("mark unanswered", err)
}

// refused tells messaging's refusals (the conversation handed over or
// gone, the 24-hour window closed, a message the channel cannot take, the
// platform's no: 4xx and 502 platform_error), which the run records and
// goes on, from what a retry of the turn may cure (messaging unreachable,
// unavailable, timed out, rate limited, failing): the first wrap
// app.ErrSendRefused, the second stay as they are.
func refused(what string, err error) error {
	if err == nil {
		return nil
	}
	e, ok := adminclient.AsError(err)
	// A send still in progress under its key is the first answer of
	// this turn, whose instance died mid-send: once messaging takes the
	// key over (IDEMPOTENCY_STUCK_AFTER) the retry sends.
	transient := !ok || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout ||
		e.Code == idempotency.CodeInProgress || (e.Status >= 500 && e.Code != errs.CodePlatformError)
	if transient {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s %w: %s: %s", what, app.ErrSendRefused, e.Code, e.Message)
}

// outbound is a flow message as messaging sends it: a carousel, or a text
// with its quick replies or buttons.
func outbound(m run.Message) messagingapi.OutboundMessage {
	buttons := func(bs []run.Button) []messagingapi.Button {
		out := make([]messagingapi.Button, len(bs))
		for i, b := range bs {
			out[i] = messagingapi.Button{Type: b.Type, Title: b.Title, URL: b.URL, Payload: b.Payload}
		}
		return out
	}
	if m.Type == "carousel" {
		cards := make([]messagingapi.Card, len(m.Cards))
		for i, c := range m.Cards {
			cards[i] = messagingapi.Card{Title: c.Title, Subtitle: c.Subtitle, ImageURL: c.ImageURL, Buttons: buttons(c.Buttons)}
		}
		return messagingapi.OutboundMessage{Type: "carousel", Cards: cards}
	}
	out := messagingapi.OutboundMessage{Type: "text", Text: m.Text, QuickReplies: m.QuickReplies}
	if len(m.Buttons) > 0 {
		out.Buttons = buttons(m.Buttons)
	}
	return out
}

// WorkspaceMaxAge is how long an instance answers a workspace's chat turns
// from what the gateway last told it of the workspace, rather than ask
// again for every turn: its name and plan, and how much of its AI limit
// is used, may be that old (docs/chat.md "Billing and limits").
const WorkspaceMaxAge = time.Second

// Workspaces reads the workspaces from the gateway, which owns them and
// their plans, each at most once every WorkspaceMaxAge.
type Workspaces struct {
	services *adminclient.Client
	known    *recent.Cache[string, app.Workspace]
}

var _ app.Workspaces = (*Workspaces)(nil)

// NewWorkspaces returns the workspaces, reached through services.
func NewWorkspaces(services *adminclient.Client) *Workspaces {
	return &Workspaces{services: services, known: recent.New[string, app.Workspace](WorkspaceMaxAge)}
}

// Workspace implements app.Workspaces. A workspace read less than
// WorkspaceMaxAge ago is answered as it was read; an error is not kept.
func (w *Workspaces) Workspace(ctx context.Context, workspaceID string) (app.Workspace, error) {
	return w.known.Get(workspaceID, func() (app.Workspace, error) { return w.read(ctx, workspaceID) })
}

// read asks the gateway for the workspace.
func (w *Workspaces) read(ctx context.Context, workspaceID string) (app.Workspace, error) {
	ws, err := w.services.GetWorkspace(ctx, workspaceID)
	if e, ok := adminclient.AsError(err); ok && e.Status == http.StatusNotFound {
		return app.Workspace{}, fmt.Errorf("%w: %s", app.ErrWorkspaceNotFound, workspaceID)
	}
	if err != nil {
		return app.Workspace{}, err
	}
	has := func(module string) bool { return slices.Contains(ws.Plan.Modules, module) }
	return app.Workspace{
		Name: ws.Name, AIUsed: ws.Plan.AIUsed, AILimit: ws.Plan.AILimit,
		Plan: app.Plan{Flows: has(gatewayapi.ModuleFlows), Modules: run.Modules{
			FlowAI: has(gatewayapi.ModuleFlowAI), FlowScript: has(gatewayapi.ModuleFlowScript),
		}},
	}, nil
}
