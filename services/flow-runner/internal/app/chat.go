package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// The chat runs (docs/chat.md): a channel in auto or suggest mode has its
// customer messages answered by the flow-runner, one chat turn at a time
// per conversation, through the ports below. Messaging owns the
// conversations and sends; the gateway owns the workspaces and their
// plans.

// Channel modes a chat turn is answered in.
const (
	ModeAuto    = "auto"
	ModeSuggest = "suggest"
)

// Why a customer message got no answer (Conversations.MarkUnanswered).
const (
	UnansweredAILimitReached = "ai_limit_reached"
	UnansweredAIUnavailable  = "ai_unavailable"
)

// Turn is one customer message a channel's built-in AI answers: a chat
// turn as messaging numbered it.
type Turn struct {
	ID             string
	WorkspaceID    string
	ConversationID string
	// Seq numbers the conversation's turns 1, 2, … in the order their
	// messages were stored.
	Seq int64
	// Mode is the channel's mode when the message was stored: ModeAuto or
	// ModeSuggest.
	Mode      string
	Chat      run.Chat
	Message   run.CustomerMessage
	CreatedAt time.Time
}

// Workspace is what a chat run needs of its workspace.
type Workspace struct {
	Name string
	// Plan is what the plan's modules open.
	Plan    Plan
	AIUsed  int64
	AILimit int64
}

// ErrWorkspaceNotFound is a turn's workspace the gateway does not know (it
// was deleted since): the turn can never be answered.
var ErrWorkspaceNotFound = errors.New("workspace not found")

// Workspaces reads the workspaces, which the gateway keeps; an unknown
// one is ErrWorkspaceNotFound.
type Workspaces interface {
	Workspace(ctx context.Context, workspaceID string) (Workspace, error)
}

// ErrSendRefused is a send or a change of the conversation that messaging
// refused for good (the conversation is handed over, the 24-hour window is
// closed, the platform said no): the run records it and goes on. Any other
// error of Conversations is transient, and the turn is answered again
// later.
var ErrSendRefused = errors.New("refused")

// Conversations changes the conversations a chat run answers, through
// messaging. key makes a send or a draft idempotent: a repeat does nothing
// more.
type Conversations interface {
	Send(ctx context.Context, workspaceID, conversationID, key, runID string, m run.Message) error
	Draft(ctx context.Context, workspaceID, conversationID, key, runID string, ms []run.Message) error
	HandOver(ctx context.Context, workspaceID, conversationID, reason string) error
	ResumeAI(ctx context.Context, workspaceID, conversationID string) error
	AddTags(ctx context.Context, workspaceID, conversationID string, tags []string) error
	Assign(ctx context.Context, workspaceID, conversationID, operator string) error
	MarkUnanswered(ctx context.Context, workspaceID, conversationID, reason string) error
}

// ErrTurnEarly is a turn whose predecessor in its conversation is not
// answered yet: it is answered after it.
var ErrTurnEarly = errors.New("the conversation's previous turn is not answered yet")

// WaitingAtDelay is a turn that came while its conversation's run waits at
// a delay node: it is answered once the run has gone on.
type WaitingAtDelay struct {
	Until time.Time
}

func (e *WaitingAtDelay) Error() string {
	return fmt.Sprintf("the conversation's run waits at a delay until %s", e.Until.UTC().Format(time.RFC3339))
}
