package app

import (
	"context"
	"errors"
	"strings"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// SendSuggestion sends the waiting suggestion of the workspace's
// conversation to the customer as an operator's reply: sender user, the
// operator (an email, when given) in each message's metadata, through the
// one send path. It goes as drafted, or as edited when edited is not
// empty. It is taken before the first message goes, so that of two
// operators sending it one does (conversation.ErrNoSuggestion for the
// other). A message the send path refuses stops it: the messages not sent
// wait again as the suggestion (unless a newer draft came meanwhile), and
// the refusal is returned with the messages that went out before it.
// Given seen, the draft the operator read, only that one is sent: another
// waiting is conversation.ErrSuggestionReplaced, and nothing is sent.
func (a *App) SendSuggestion(ctx context.Context, workspaceID, conversationID, operator string, seen *conversation.SuggestionMark, edited []conversation.Outbound) ([]conversation.Message, error) {
	operator = strings.ToLower(strings.TrimSpace(operator))
	if operator != "" {
		if err := conversation.CheckEmail("operator", operator); err != nil {
			return nil, err
		}
	}
	if len(edited) > 0 {
		if err := conversation.CheckMessages(edited); err != nil {
			return nil, err
		}
	}
	conv, err := a.inbox.Get(ctx, workspaceID, conversationID)
	if err != nil {
		return nil, err
	}
	s, err := a.suggestions.Take(ctx, conv.ID, seen)
	if err != nil {
		return nil, err
	}
	// Taken: the inbox no longer shows it waiting, whatever follows.
	defer a.inboxChanged(conv.WorkspaceID, conv.ID)
	msgs := s.Messages
	if len(edited) > 0 {
		msgs = edited
	}
	by := conversation.Author{Sender: conversation.SenderUser, Operator: operator}
	var sent []conversation.Message
	for i, o := range msgs {
		m, err := a.sendOutbound(ctx, conv.WorkspaceID, conv.ID, by, o, nil)
		if err == nil {
			sent = append(sent, m)
			continue
		}
		rest := msgs[i:]
		var delivered *DeliveredError
		if errors.As(err, &delivered) {
			// The customer has this one, all or part of it.
			rest = msgs[i+1:]
		}
		if len(rest) > 0 {
			s.Messages = rest
			if perr := a.suggestions.PutBack(context.WithoutCancel(ctx), s); perr != nil {
				a.observer.SuggestionNotPutBack(conv.ID, perr)
			}
		}
		return sent, err
	}
	return sent, nil
}
