package adapters

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// ChatFlowStore keeps each channel's chat flow in flows.chat_flows.
type ChatFlowStore struct {
	db *gorm.DB
}

var _ catalog.ChatFlowStore = (*ChatFlowStore)(nil)

// NewChatFlowStore returns the store over gdb (opened for Schema).
func NewChatFlowStore(gdb *gorm.DB) *ChatFlowStore {
	return &ChatFlowStore{db: gdb}
}

// SetChatFlow implements catalog.ChatFlowStore. The channel's row is
// replaced only when it is the same workspace's: a channel id named by
// another workspace changes nothing.
func (s *ChatFlowStore) SetChatFlow(ctx context.Context, workspaceID, channelID, flowID string, now time.Time) error {
	if !validID(workspaceID) || !validID(channelID) || !validID(flowID) {
		return catalog.ErrFlowNotFound
	}
	res := s.db.WithContext(ctx).Exec(`INSERT INTO `+Schema+`.chat_flows AS c (channel_id, workspace_id, flow_id, updated_at)
	VALUES (?, ?, ?, ?)
	ON CONFLICT (channel_id) DO UPDATE SET flow_id = excluded.flow_id, updated_at = excluded.updated_at
	WHERE c.workspace_id = excluded.workspace_id`, channelID, workspaceID, flowID, now)
	if res.Error != nil {
		return fmt.Errorf("set chat flow: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return catalog.ErrChannelOfAnotherWorkspace
	}
	return nil
}

// ChatFlow implements catalog.ChatFlowStore: the assignment is read with
// its flow's status and triggers as they are now, so that a flow
// deactivated, or republished without the chat trigger, answers no more.
func (s *ChatFlowStore) ChatFlow(ctx context.Context, workspaceID, channelID string) (string, int, error) {
	if !validID(workspaceID) || !validID(channelID) {
		return "", 0, nil
	}
	var found []struct {
		FlowID           string
		PublishedVersion int
	}
	err := s.db.WithContext(ctx).Raw(`SELECT c.flow_id, f.published_version FROM `+Schema+`.chat_flows c
	JOIN `+Schema+`.flows f ON f.id = c.flow_id AND f.workspace_id = c.workspace_id
	WHERE c.channel_id = ? AND c.workspace_id = ? AND f.status = ? AND f.triggers @> ?::jsonb`,
		channelID, workspaceID, catalog.StatusActive, jsonList{catalog.TriggerChat}).Scan(&found).Error
	if err != nil {
		return "", 0, fmt.Errorf("read chat flow: %w", err)
	}
	if len(found) == 0 {
		return "", 0, nil
	}
	return found[0].FlowID, found[0].PublishedVersion, nil
}

// ClearChatFlow implements catalog.ChatFlowStore.
func (s *ChatFlowStore) ClearChatFlow(ctx context.Context, workspaceID, channelID string) error {
	if !validID(workspaceID) || !validID(channelID) {
		return nil
	}
	err := s.db.WithContext(ctx).Exec(`DELETE FROM `+Schema+`.chat_flows WHERE channel_id = ? AND workspace_id = ?`, channelID, workspaceID).Error
	if err != nil {
		return fmt.Errorf("clear chat flow: %w", err)
	}
	return nil
}
