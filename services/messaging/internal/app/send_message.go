package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/receipt"
)

// Every send follows one path, whoever sends (the API, an operator, the
// built-in AI): load the workspace's conversation and its platform's
// transport, check that its author may send there and the messaging
// window, let the platform take it, then store what was delivered as sent
// by its author, with the receipt of the answer when the send carries an
// idempotency key (rr). Nothing is stored when the platform does not take
// it, and nothing goes to the outbox: replies are never webhook events.
//
// An error is a refusal, nothing delivered, unless it is a
// *DeliveredError.

// SendMessage sends a text, with quick replies or buttons, from by.
func (a *App) SendMessage(ctx context.Context, workspaceID, conversationID string, by conversation.Author, o conversation.OutboundText, rr *ReceiptRequest[conversation.Message]) (conversation.Message, error) {
	if err := o.Validate(); err != nil {
		return conversation.Message{}, err
	}
	s, err := a.prepareSend(ctx, workspaceID, conversationID, by)
	if err != nil {
		return conversation.Message{}, err
	}
	sent, err := s.transport.SendText(ctx, s.target, o)
	if err := a.observeSend(s, err); err != nil {
		return conversation.Message{}, err
	}
	msg := a.sentMessage(s, conversation.TypeText, o.Text, o.Metadata(), sent)
	return msg, a.storeSent(ctx, s, rr.receipt(a.observer, workspaceID, msg.ID, msg, nil), msg)
}

// SendImage sends the image, then the text (when there is one) as a
// separate message, and returns the stored messages in that order. The text
// is checked against the platform's rules before the image goes out; when
// the platform still refuses the text after the image went out, the image
// is stored and a *DeliveredError says what did not go.
func (a *App) SendImage(ctx context.Context, workspaceID, conversationID string, o conversation.OutboundImage, rr *ReceiptRequest[[]conversation.Message]) ([]conversation.Message, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s, err := a.prepareSend(ctx, workspaceID, conversationID, conversation.ByAPI)
	if err != nil {
		return nil, err
	}
	if checker, ok := s.transport.(conversation.TextChecker); ok && o.Text != "" {
		if err := a.observeSend(s, checker.CheckText(s.target, conversation.OutboundText{Text: o.Text})); err != nil {
			return nil, err
		}
	}
	sent, err := s.transport.SendImage(ctx, s.target, o.ImageURL)
	if err := a.observeSend(s, err); err != nil {
		return nil, err
	}
	msgs := []conversation.Message{a.sentMessage(s, conversation.TypeImage, o.ImageURL, map[string]any{"image_url": o.ImageURL}, sent)}
	// The image and the text are stored together, with the answer to
	// both, so that a key never answers half of them.
	var failed error
	if o.Text != "" {
		sent, err := s.transport.SendText(ctx, s.target, conversation.OutboundText{Text: o.Text})
		if err := a.observeSend(s, err); err != nil {
			failed = &DeliveredError{Err: err}
		} else {
			msgs = append(msgs, a.sentMessage(s, conversation.TypeText, o.Text, map[string]any{}, sent))
		}
	}
	if err := a.storeSent(ctx, s, rr.receipt(a.observer, workspaceID, msgs[0].ID, msgs, failed), msgs...); err != nil {
		return msgs, err
	}
	return msgs, failed
}

// SendCarousel sends a row of cards from by, stored as one carousel
// message. On platforms that send a carousel as several messages, the
// first one's id is the message's external_id and all of them are in
// metadata.external_ids.
func (a *App) SendCarousel(ctx context.Context, workspaceID, conversationID string, by conversation.Author, o conversation.OutboundCarousel, rr *ReceiptRequest[conversation.Message]) (conversation.Message, error) {
	if err := o.Validate(); err != nil {
		return conversation.Message{}, err
	}
	s, err := a.prepareSend(ctx, workspaceID, conversationID, by)
	if err != nil {
		return conversation.Message{}, err
	}
	sents, err := s.transport.SendCarousel(ctx, s.target, o)
	if err == nil && len(sents) == 0 {
		err = fmt.Errorf("%s transport sent no message for a carousel", s.platform)
	}
	if err := a.observeSend(s, err); err != nil {
		var partly *conversation.PartlySentError
		if errors.As(err, &partly) {
			// The customer has the first cards: nothing is stored (the
			// carousel is not), but a key keeps this answer, so that a
			// repeat does not send them again.
			failed := &DeliveredError{Err: err}
			return conversation.Message{}, a.keepFailure(ctx, rr.receipt(a.observer, workspaceID, "", conversation.Message{}, failed), failed)
		}
		return conversation.Message{}, err
	}
	md := o.Metadata()
	if len(sents) > 1 {
		ids := make([]string, len(sents))
		for i, sent := range sents {
			ids[i] = sent.ExternalID
		}
		md["external_ids"] = ids
	}
	msg := a.sentMessage(s, conversation.TypeCarousel, "", md, sents[0])
	return msg, a.storeSent(ctx, s, rr.receipt(a.observer, workspaceID, msg.ID, msg, nil), msg)
}

// SendTyping shows the customer a typing indicator; nothing is stored.
func (a *App) SendTyping(ctx context.Context, workspaceID, conversationID string) error {
	s, err := a.prepareSend(ctx, workspaceID, conversationID, conversation.ByAPI)
	if err != nil {
		return err
	}
	return a.observeSend(s, s.transport.SendTyping(ctx, s.target))
}

// send is what one send needs, loaded and checked.
type send struct {
	target    conversation.Target
	transport conversation.Transport
	platform  string
	by        conversation.Author
}

func (a *App) prepareSend(ctx context.Context, workspaceID, conversationID string, by conversation.Author) (send, error) {
	conv, ch, err := a.inbox.GetWithChannel(ctx, workspaceID, conversationID)
	if err != nil {
		return send{}, err
	}
	platform := string(conv.Platform)
	if err := by.CheckSend(conv); err != nil {
		a.observer.Send(platform, SendHandedOver)
		return send{}, err
	}
	if err := by.CheckChannel(ch); err != nil {
		a.observer.Send(platform, SendChannelExternal)
		return send{}, err
	}
	transport, ok := a.transports[conv.Platform]
	if !ok {
		a.observer.Send(platform, SendUnsupported)
		return send{}, &conversation.UnsupportedPlatformError{Platform: conv.Platform}
	}
	if err := conversation.CheckWindow(conv, a.now(), a.window); err != nil {
		a.observer.Send(platform, SendOutsideWindow)
		return send{}, err
	}
	return send{target: conversation.Target{Channel: ch, Conversation: conv, Sender: by.Sender}, transport: transport, platform: platform, by: by}, nil
}

// observeSend counts a platform call's outcome and passes its error on.
func (a *App) observeSend(s send, err error) error {
	var fe *conversation.FieldError
	var pe *conversation.PlatformError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		a.observer.Send(s.platform, SendInvalid)
	case errors.Is(err, conversation.ErrOutsideWindow):
		a.observer.Send(s.platform, SendOutsideWindow)
	case errors.As(err, &pe):
		a.observer.Send(s.platform, SendRefused)
	default:
		a.observer.Send(s.platform, SendError)
	}
	return err
}

// sentMessage is a message the platform took, as it is stored: sent by
// its author, with what is kept of them, at the time it went.
func (a *App) sentMessage(s send, typ, content string, metadata map[string]any, sent conversation.Sent) conversation.Message {
	conv := s.target.Conversation
	return conversation.Message{
		ID: a.newID(), WorkspaceID: conv.WorkspaceID, ConversationID: conv.ID,
		Sender: s.by.Sender, Type: typ, Content: content,
		Metadata: s.by.Metadata(metadata), ExternalID: sent.ExternalID, CreatedAt: a.timestamp(),
	}
}

// storeSent stores delivered messages, with the send's receipt when not
// nil. The customer has them: they are stored even when the caller has
// gone, and a failure is a *DeliveredError.
func (a *App) storeSent(ctx context.Context, s send, rec *receipt.Receipt, msgs ...conversation.Message) error {
	if err := a.inbox.AddSent(context.WithoutCancel(ctx), msgs, rec); err != nil {
		// Only our copy is missing. Say so where an operator can find
		// the platform's ids.
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i] = m.ExternalID
		}
		a.observer.SentNotStored(s.target.Conversation.ID, s.platform, ids, err)
		a.observer.Send(s.platform, SendError)
		return &DeliveredError{Err: fmt.Errorf("store sent message: %w", err)}
	}
	for range msgs {
		a.observer.Send(s.platform, SendSent)
	}
	a.inboxChanged(s.target.Conversation.WorkspaceID, s.target.Conversation.ID)
	return nil
}

// keepFailure stores the receipt (when not nil) of a send that failed
// after part of it was delivered and stored nothing, and returns its
// error.
func (a *App) keepFailure(ctx context.Context, rec *receipt.Receipt, failed *DeliveredError) error {
	if rec != nil {
		if err := a.inbox.AddReceipt(context.WithoutCancel(ctx), *rec); err != nil {
			// The key's Redis answer still holds it.
			a.observer.ReceiptNotStored(rec.WorkspaceID, err)
		}
	}
	return failed
}
