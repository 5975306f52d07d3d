package adapters

import (
	"context"
	"database/sql"
	"errors"
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

// chatFlowJoin finds the flow that answers a channel (cf its assignment,
// f the flow) with chatFlowArgs as the parameters from first on: the
// assignment's flow while it is active with the chat trigger, as it is
// now, so that a flow deactivated, or republished without the chat
// trigger, answers no more. ChatFlow and ChatStore.Hold (with its lock)
// read it.
func chatFlowJoin(first int) string {
	return fmt.Sprintf(Schema+`.chat_flows cf
	JOIN `+Schema+`.flows f ON f.id = cf.flow_id AND f.workspace_id = cf.workspace_id
		AND f.status = $%d AND f.triggers @> $%d::jsonb`, first, first+1)
}

// chatFlowArgs are chatFlowJoin's parameters.
func chatFlowArgs() []any { return []any{catalog.StatusActive, jsonList{catalog.TriggerChat}} }

// chatFlowStatement reads a channel's chat flow ($3 the channel, $4 the
// workspace).
var chatFlowStatement = `SELECT cf.flow_id, f.published_version FROM ` + chatFlowJoin(1) + `
	WHERE cf.channel_id = $3 AND cf.workspace_id = $4`

// ChatFlow implements catalog.ChatFlowStore (chatFlowJoin).
func (s *ChatFlowStore) ChatFlow(ctx context.Context, workspaceID, channelID string) (string, int, error) {
	if !validID(workspaceID) || !validID(channelID) {
		return "", 0, nil
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return "", 0, fmt.Errorf("read chat flow: %w", err)
	}
	var flowID string
	var version int
	err = sqlDB.QueryRowContext(ctx, chatFlowStatement, append(chatFlowArgs(), channelID, workspaceID)...).Scan(&flowID, &version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", 0, nil
	case err != nil:
		return "", 0, fmt.Errorf("read chat flow: %w", err)
	}
	return flowID, version, nil
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
