package http

import (
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/httpx"
	webchatadapter "github.com/parleyhq/parley/services/messaging/internal/adapters/webchat"
	"github.com/parleyhq/parley/services/messaging/internal/app"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/comment"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"time"
)

// The converters from the domain to the bodies of pkg/api/messaging.

func toAPIChannel(c channel.Channel) messagingapi.Channel {
	return messagingapi.Channel{ID: c.ID, Kind: string(c.Kind), ExternalID: c.ExternalID, AIMode: string(c.AIMode), Status: string(c.Status)}
}

func toAPIAdminChannel(c channel.Channel) messagingapi.AdminChannel {
	return messagingapi.AdminChannel{
		Channel:     toAPIChannel(c),
		WorkspaceID: c.WorkspaceID, Secret: c.Secret, CreatedAt: httpx.Timestamp(c.CreatedAt),
	}
}

func toAPIConversation(c conversation.Conversation) messagingapi.Conversation {
	return messagingapi.Conversation{
		ID: c.ID, Platform: string(c.Platform), ChannelID: c.ChannelID,
		Contact:       messagingapi.Contact{ID: c.Contact.ID, SenderID: c.Contact.SenderID, Name: c.Contact.Name, ProfilePic: c.Contact.ProfilePic},
		LastMessageAt: httpx.Timestamp(c.LastMessageAt), CreatedAt: httpx.Timestamp(c.CreatedAt),
	}
}

// toAPIMessage renders m; a message without metadata has an empty object,
// never null.
func toAPIMessage(m conversation.Message) messagingapi.Message {
	md := m.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return messagingapi.Message{
		ID: m.ID, ConversationID: m.ConversationID, Sender: string(m.Sender), Type: m.Type,
		Content: m.Content, Metadata: md, ExternalID: m.ExternalID, CreatedAt: httpx.Timestamp(m.CreatedAt),
	}
}

func toAPIMessages(msgs []conversation.Message) []messagingapi.Message {
	out := make([]messagingapi.Message, len(msgs))
	for i, m := range msgs {
		out[i] = toAPIMessage(m)
	}
	return out
}

func toAPIComment(c comment.Comment) messagingapi.Comment {
	return messagingapi.Comment{
		ID: c.ExternalID, PostID: c.PostID, ParentID: c.ParentID, Text: c.Text,
		From:       messagingapi.CommentAuthor{ID: c.FromID, Name: c.FromName},
		ReceivedAt: httpx.Timestamp(c.CreatedAt), Platform: string(c.Platform), ChannelID: c.ChannelID,
		Status: string(c.Status),
	}
}

// fromAPIButtons are the buttons of a send as the domain takes them.
func fromAPIButtons(in []messagingapi.Button) []conversation.Button {
	var out []conversation.Button
	for _, b := range in {
		out = append(out, conversation.Button{Type: b.Type, Title: b.Title, URL: b.URL, Payload: b.Payload})
	}
	return out
}

// toAPIConversationState renders a conversation with its chat state.
func toAPIConversationState(s app.ConversationState) messagingapi.ConversationState {
	ai := messagingapi.ConversationAIOn
	if s.Chat.HandedOver {
		ai = messagingapi.ConversationHandedOver
	}
	tags := s.Chat.Tags
	if tags == nil {
		tags = []string{}
	}
	return messagingapi.ConversationState{
		Conversation: toAPIConversation(s.Conversation), WorkspaceID: s.WorkspaceID,
		AI: ai, HandoverReason: s.Chat.HandoverReason, Unanswered: s.Chat.Unanswered,
		Tags: tags, Assignee: s.Chat.Assignee, SuggestionWaiting: s.SuggestionWaiting,
		ReplyWindowEndsAt: httpx.OptionalTimestamp(optionalTime(s.WindowEndsAt)),
	}
}

// optionalTime is t, nil when zero.
func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func toAPISuggestion(s conversation.Suggestion) *messagingapi.Suggestion {
	out := &messagingapi.Suggestion{RunID: s.RunID, Messages: make([]messagingapi.OutboundMessage, len(s.Messages)), CreatedAt: httpx.Timestamp(s.CreatedAt)}
	for i, m := range s.Messages {
		out.Messages[i] = toAPIOutbound(m)
	}
	return out
}

// toAPIOutbound renders a message a chat run drafted.
func toAPIOutbound(o conversation.Outbound) messagingapi.OutboundMessage {
	if o.Carousel != nil {
		return messagingapi.OutboundMessage{Type: conversation.TypeCarousel, Cards: webchatadapter.APICards(o.Carousel.Elements)}
	}
	return messagingapi.OutboundMessage{
		Type: conversation.TypeText, Text: o.Text.Text, QuickReplies: o.Text.QuickReplies, Buttons: webchatadapter.APIButtons(o.Text.Buttons),
	}
}

// fromAPIOutbound is a chat run's message as the domain takes it: a text
// or a carousel by its type; neither for another type, which the domain
// refuses naming the field.
func fromAPIOutbound(m messagingapi.OutboundMessage) conversation.Outbound {
	switch m.Type {
	case conversation.TypeText:
		return conversation.Outbound{Text: &conversation.OutboundText{Text: m.Text, QuickReplies: m.QuickReplies, Buttons: fromAPIButtons(m.Buttons)}}
	case conversation.TypeCarousel:
		c := &conversation.OutboundCarousel{Elements: make([]conversation.Card, len(m.Cards))}
		for i, e := range m.Cards {
			c.Elements[i] = fromAPICard(e)
		}
		return conversation.Outbound{Carousel: c}
	}
	return conversation.Outbound{}
}

func fromAPIOutbounds(in []messagingapi.OutboundMessage) []conversation.Outbound {
	out := make([]conversation.Outbound, len(in))
	for i, m := range in {
		out[i] = fromAPIOutbound(m)
	}
	return out
}

// fromAPICard is a carousel's card as the domain takes it.
func fromAPICard(c messagingapi.Card) conversation.Card {
	return conversation.Card{Title: c.Title, Subtitle: c.Subtitle, ImageURL: c.ImageURL, Buttons: fromAPIButtons(c.Buttons)}
}
