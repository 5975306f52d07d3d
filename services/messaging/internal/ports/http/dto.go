package http

import (
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/comment"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
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
