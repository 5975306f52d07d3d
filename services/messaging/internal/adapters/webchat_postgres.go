package adapters

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/webchat"
)

// WebchatStore finds webchat visitors' conversations: a visitor is the
// contact whose sender_id is their visitor id.
type WebchatStore struct {
	inbox *ConversationStore
}

var _ webchat.Conversations = (*WebchatStore)(nil)

// NewWebchatStore returns a store on gdb.
func NewWebchatStore(gdb *gorm.DB) *WebchatStore {
	return &WebchatStore{inbox: NewConversationStore(gdb)}
}

// OfVisitor returns the channel's conversation with the visitor.
func (s *WebchatStore) OfVisitor(ctx context.Context, channelID, visitorID string) (conversation.Conversation, error) {
	if !validID(channelID) {
		return conversation.Conversation{}, conversation.ErrNotFound
	}
	var rows []conversationRow
	// contacts (channel_id, sender_id) and conversations (channel_id,
	// contact_id) are both unique: one row at most.
	err := s.inbox.conversations(ctx).
		Where("v.channel_id = ? AND c.channel_id = ? AND c.sender_id = ?", channelID, channelID, visitorID).
		Limit(1).Scan(&rows).Error
	if err != nil {
		return conversation.Conversation{}, fmt.Errorf("load conversation of visitor %s: %w", visitorID, err)
	}
	if len(rows) == 0 {
		return conversation.Conversation{}, conversation.ErrNotFound
	}
	return rows[0].toDomain(), nil
}
