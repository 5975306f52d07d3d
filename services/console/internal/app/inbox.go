package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/parleyhq/parley/pkg/adminclient"
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/services/console/internal/domain/operator"
)

// The inbox (docs/console.md "The inbox"): the workspace's conversations,
// one conversation's messages and chat state, and what an operator does
// in it. Messaging checks that every conversation named is the
// workspace's; another workspace's is ErrConversationNotFound, as one
// that does not exist.

// Inbox is messaging's admin calls on conversations, and the
// flow-runner's list and trace of runs; *adminclient.Client implements it.
type Inbox interface {
	ListInbox(ctx context.Context, workspaceID string, f adminclient.InboxFilter) (messagingapi.InboxPage, error)
	Conversation(ctx context.Context, workspaceID, conversationID string) (messagingapi.ConversationState, error)
	ConversationMessages(ctx context.Context, workspaceID, conversationID, before string, limit int) (messagingapi.MessagePage, error)
	Suggestion(ctx context.Context, workspaceID, conversationID string) (*messagingapi.Suggestion, error)
	SendOperatorMessage(ctx context.Context, conversationID string, m messagingapi.SendOperatorMessage) (messagingapi.Message, error)
	SendSuggestion(ctx context.Context, conversationID string, s messagingapi.SendSuggestion) ([]messagingapi.Message, error)
	DiscardSuggestion(ctx context.Context, workspaceID, conversationID string, seen *messagingapi.SuggestionSeen) (messagingapi.ConversationState, error)
	HandOver(ctx context.Context, workspaceID, conversationID, reason string) (messagingapi.ConversationState, error)
	ResumeAI(ctx context.Context, workspaceID, conversationID string) (messagingapi.ConversationState, error)
	AddTags(ctx context.Context, workspaceID, conversationID string, tags []string) (messagingapi.ConversationState, error)
	Assign(ctx context.Context, workspaceID, conversationID, assignee string) (messagingapi.ConversationState, error)
	ListRuns(ctx context.Context, workspaceID string, f adminclient.RunFilter) (flowrunnerapi.RunPage, error)
	RunTrace(ctx context.Context, workspaceID, runID string) (flowrunnerapi.Trace, error)
}

// ErrConversationNotFound is a conversation the workspace does not have:
// unknown, or another workspace's.
var ErrConversationNotFound = errors.New("no such conversation in this workspace")

// ErrRunNotFound is a run the workspace does not have.
var ErrRunNotFound = errors.New("no such run in this workspace")

// ConversationPageSize is how many messages the conversation page shows,
// the newest; older ones are a link away (the API's cursor).
const ConversationPageSize = 50

// Conversation is what the conversation page shows: the conversation and
// its chat state, a page of its messages (newest first), the waiting
// suggestion (nil when none) and its chat runs, newest first.
type Conversation struct {
	State      messagingapi.ConversationState
	Messages   messagingapi.MessagePage
	Suggestion *messagingapi.Suggestion
	Runs       []flowrunnerapi.RunSummary
	// RunsUnavailable is the flow-runner's error when it did not answer:
	// the page is drawn without the runs rather than not at all.
	RunsUnavailable error
}

// conversationError names messaging's not-found answer as
// ErrConversationNotFound, and wraps the rest with what was being done.
func conversationError(doing string, err error) error {
	if e, ok := adminclient.AsError(err); ok && e.Status == http.StatusNotFound && e.Code == "conversation_not_found" {
		return ErrConversationNotFound
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// inConversation checks op may see the workspace and that conversationID
// is an id at all (one that is not names no conversation).
func inConversation(op operator.Operator, workspaceID, conversationID string) error {
	if err := visible(op, workspaceID); err != nil {
		return err
	}
	if !IsID(conversationID) {
		return ErrConversationNotFound
	}
	return nil
}

// Inbox returns a page of the workspace's conversations as f filters
// them. The workspace is read from the gateway first: one that does not
// exist is ErrWorkspaceNotFound, never an empty inbox.
func (a *App) Inbox(ctx context.Context, op operator.Operator, workspaceID string, f adminclient.InboxFilter) (messagingapi.InboxPage, error) {
	if _, err := a.Workspace(ctx, op, workspaceID); err != nil {
		return messagingapi.InboxPage{}, err
	}
	page, err := a.inbox.ListInbox(ctx, workspaceID, f)
	if err != nil {
		return messagingapi.InboxPage{}, workspaceError(workspaceID, "list conversations", err)
	}
	return page, nil
}

// Conversation returns what the conversation page shows; before pages
// back through its messages ("" for the newest).
func (a *App) Conversation(ctx context.Context, op operator.Operator, workspaceID, conversationID, before string) (Conversation, error) {
	if err := inConversation(op, workspaceID, conversationID); err != nil {
		return Conversation{}, err
	}
	var out Conversation
	var err error
	if out.State, err = a.inbox.Conversation(ctx, workspaceID, conversationID); err != nil {
		return Conversation{}, conversationError("get conversation", err)
	}
	if out.Messages, err = a.inbox.ConversationMessages(ctx, workspaceID, conversationID, before, ConversationPageSize); err != nil {
		return Conversation{}, conversationError("list messages", err)
	}
	if out.State.SuggestionWaiting {
		if out.Suggestion, err = a.inbox.Suggestion(ctx, workspaceID, conversationID); err != nil {
			return Conversation{}, conversationError("get suggestion", err)
		}
	}
	runs, err := a.inbox.ListRuns(ctx, workspaceID, adminclient.RunFilter{ConversationID: conversationID, Limit: 20})
	if err != nil {
		out.RunsUnavailable = err
	}
	out.Runs = runs.Runs
	return out, nil
}

// replyInput is what a reply form's claim holds: the same message to
// another conversation, or another message, is a reply of its own.
type replyInput struct {
	ConversationID string                       `json:"conversation_id"`
	Message        messagingapi.OutboundMessage `json:"message"`
}

// Reply sends an operator's reply to the conversation's customer through
// messaging's send path, as sender user with op's email kept. formID is
// the reply form's: the form posted again with the same message sends
// nothing (once).
func (a *App) Reply(ctx context.Context, op operator.Operator, workspaceID, conversationID, formID string, m messagingapi.OutboundMessage) (messagingapi.Message, error) {
	if err := inConversation(op, workspaceID, conversationID); err != nil {
		return messagingapi.Message{}, err
	}
	return once(ctx, a, workspaceID, formID, FormReply, replyInput{conversationID, m}, func() (messagingapi.Message, error) {
		sent, err := written(a.inbox.SendOperatorMessage(ctx, conversationID, messagingapi.SendOperatorMessage{WorkspaceID: workspaceID, Operator: op.Email, Message: m}))
		if err != nil {
			return messagingapi.Message{}, conversationError("send reply", err)
		}
		return sent, nil
	}, func(sent messagingapi.Message) string { return sent.ID })
}

// ErrNoSuggestion is a send of a suggestion when none waits: another
// operator sent or discarded it.
var ErrNoSuggestion = errors.New("no suggestion waits")

// ErrSuggestionReplaced is a send of a suggestion the operator saw after a
// newer one replaced it: what waits now was not read.
var ErrSuggestionReplaced = errors.New("a newer suggestion replaced the one seen")

// SuggestionMark names one draft, as the page that shows it tells it to
// the send: its run and when it was drafted ("" when it names neither).
func SuggestionMark(s messagingapi.Suggestion) string {
	if s.RunID == "" && s.CreatedAt == "" {
		return ""
	}
	return s.RunID + "@" + s.CreatedAt
}

// seenDraft is the draft a SuggestionMark names, nil for "": messaging
// acts on that draft only, in the same statement that takes it.
func seenDraft(mark string) *messagingapi.SuggestionSeen {
	if mark == "" {
		return nil
	}
	i := strings.LastIndex(mark, "@")
	if i < 0 {
		return &messagingapi.SuggestionSeen{RunID: mark} // no mark: messaging refuses it
	}
	return &messagingapi.SuggestionSeen{RunID: mark[:i], CreatedAt: mark[i+1:]}
}

// suggestionError is conversationError for a send or discard of a
// suggestion: none waiting is ErrNoSuggestion, another waiting than the
// one seen ErrSuggestionReplaced.
func suggestionError(doing string, err error) error {
	if e, ok := adminclient.AsError(err); ok {
		switch {
		case e.Status == http.StatusNotFound && e.Code == "suggestion_not_found":
			return ErrNoSuggestion
		case e.Status == http.StatusConflict && e.Code == "suggestion_replaced":
			return ErrSuggestionReplaced
		}
	}
	return conversationError(doing, err)
}

// SendSuggestion sends the waiting suggestion as op's reply, as drafted
// or, with edited, as edited. seen is the SuggestionMark of the draft the
// operator read: when given, a send finding none waiting is
// ErrNoSuggestion and one finding another is ErrSuggestionReplaced, and
// nothing is sent (a form posted twice, a newer draft come meanwhile).
func (a *App) SendSuggestion(ctx context.Context, op operator.Operator, workspaceID, conversationID, seen string, edited []messagingapi.OutboundMessage) ([]messagingapi.Message, error) {
	if err := inConversation(op, workspaceID, conversationID); err != nil {
		return nil, err
	}
	sent, err := a.inbox.SendSuggestion(ctx, conversationID, messagingapi.SendSuggestion{WorkspaceID: workspaceID, Operator: op.Email, Messages: edited, Seen: seenDraft(seen)})
	if err != nil {
		return sent, suggestionError("send suggestion", err)
	}
	return sent, nil
}

// ConversationChange is an operator's change to a conversation's chat
// state from the inbox.
type ConversationChange struct {
	// Action is one of the Change* constants.
	Action string
	// Tags are the tags to add (ChangeAddTags), Assignee the operator to
	// assign, "" to unassign (ChangeAssign).
	Tags     []string
	Assignee string
	// Seen is the SuggestionMark of the draft discarded
	// (ChangeDiscardSuggestion): another waiting is ErrSuggestionReplaced,
	// and none waiting is no change; "" discards whatever waits.
	Seen string
}

// The changes an operator makes to a conversation from the inbox.
const (
	ChangeDiscardSuggestion = "discard-suggestion"
	ChangeHandOver          = "handover"
	ChangeResumeAI          = "resume-ai"
	ChangeAddTags           = "tags"
	ChangeAssign            = "assignee"
)

// ErrUnknownChange is a change the inbox does not make.
var ErrUnknownChange = errors.New("no such change to a conversation")

// ChangeConversation makes op's change to the conversation and returns
// its new state.
func (a *App) ChangeConversation(ctx context.Context, op operator.Operator, workspaceID, conversationID string, c ConversationChange) (messagingapi.ConversationState, error) {
	if err := inConversation(op, workspaceID, conversationID); err != nil {
		return messagingapi.ConversationState{}, err
	}
	var s messagingapi.ConversationState
	var err error
	switch c.Action {
	case ChangeDiscardSuggestion:
		// A draft gone already is no change; another waiting is refused.
		if s, err = a.inbox.DiscardSuggestion(ctx, workspaceID, conversationID, seenDraft(c.Seen)); err != nil {
			return messagingapi.ConversationState{}, suggestionError(c.Action, err)
		}
	case ChangeHandOver:
		s, err = a.inbox.HandOver(ctx, workspaceID, conversationID, "operator "+op.Email+" in the console")
	case ChangeResumeAI:
		s, err = a.inbox.ResumeAI(ctx, workspaceID, conversationID)
	case ChangeAddTags:
		s, err = a.inbox.AddTags(ctx, workspaceID, conversationID, c.Tags)
	case ChangeAssign:
		s, err = a.inbox.Assign(ctx, workspaceID, conversationID, c.Assignee)
	default:
		return messagingapi.ConversationState{}, ErrUnknownChange
	}
	if err != nil {
		return messagingapi.ConversationState{}, conversationError(c.Action, err)
	}
	return s, nil
}

// ChatRunTrace returns a run of the workspace of any kind (a chat run's
// included) with its nodes' steps.
func (a *App) ChatRunTrace(ctx context.Context, op operator.Operator, workspaceID, runID string) (flowrunnerapi.Trace, error) {
	if err := visible(op, workspaceID); err != nil {
		return flowrunnerapi.Trace{}, err
	}
	if !IsID(runID) {
		return flowrunnerapi.Trace{}, ErrRunNotFound
	}
	t, err := a.inbox.RunTrace(ctx, workspaceID, runID)
	if e, ok := adminclient.AsError(err); ok && e.Status == http.StatusNotFound {
		return flowrunnerapi.Trace{}, ErrRunNotFound
	}
	if err != nil {
		return flowrunnerapi.Trace{}, fmt.Errorf("get run %s: %w", runID, err)
	}
	return t, nil
}
