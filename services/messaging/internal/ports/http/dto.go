package http

import (
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// channelJSON is the public channel (specification §2).
type channelJSON struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	ExternalID string `json:"external_id"`
	AIMode     string `json:"ai_mode"`
	Status     string `json:"status"`
}

func toChannelJSON(c channel.Channel) channelJSON {
	return channelJSON{ID: c.ID, Kind: string(c.Kind), ExternalID: c.ExternalID, AIMode: string(c.AIMode), Status: string(c.Status)}
}

// adminChannelJSON is the channel as operators see it: with its secret
// (to configure the platform's webhook), never with its token.
type adminChannelJSON struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	Kind        string `json:"kind"`
	ExternalID  string `json:"external_id"`
	AIMode      string `json:"ai_mode"`
	Status      string `json:"status"`
	Secret      string `json:"secret"`
	CreatedAt   string `json:"created_at"`
}

func toAdminChannelJSON(c channel.Channel) adminChannelJSON {
	return adminChannelJSON{
		ID: c.ID, WorkspaceID: c.WorkspaceID, Kind: string(c.Kind), ExternalID: c.ExternalID,
		AIMode: string(c.AIMode), Status: string(c.Status), Secret: c.Secret, CreatedAt: httpx.Timestamp(c.CreatedAt),
	}
}

type contactJSON struct {
	ID         string `json:"id"`
	SenderID   string `json:"sender_id"`
	Name       string `json:"name"`
	ProfilePic string `json:"profile_pic"`
}

type conversationJSON struct {
	ID            string      `json:"id"`
	Platform      string      `json:"platform"`
	ChannelID     string      `json:"channel_id"`
	Contact       contactJSON `json:"contact"`
	LastMessageAt string      `json:"last_message_at"`
	CreatedAt     string      `json:"created_at"`
}

func toConversationJSON(c conversation.Conversation) conversationJSON {
	return conversationJSON{
		ID: c.ID, Platform: string(c.Platform), ChannelID: c.ChannelID,
		Contact:       contactJSON{ID: c.Contact.ID, SenderID: c.Contact.SenderID, Name: c.Contact.Name, ProfilePic: c.Contact.ProfilePic},
		LastMessageAt: httpx.Timestamp(c.LastMessageAt), CreatedAt: httpx.Timestamp(c.CreatedAt),
	}
}

type messageJSON struct {
	ID             string         `json:"id"`
	ConversationID string         `json:"conversation_id"`
	Sender         string         `json:"sender"`
	Type           string         `json:"type"`
	Content        string         `json:"content"`
	Metadata       map[string]any `json:"metadata"`
	ExternalID     string         `json:"external_id"`
	CreatedAt      string         `json:"created_at"`
}

func toMessageJSON(m conversation.Message) messageJSON {
	md := m.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return messageJSON{
		ID: m.ID, ConversationID: m.ConversationID, Sender: string(m.Sender), Type: m.Type,
		Content: m.Content, Metadata: md, ExternalID: m.ExternalID, CreatedAt: httpx.Timestamp(m.CreatedAt),
	}
}
