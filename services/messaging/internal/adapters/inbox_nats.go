package adapters

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

// InboxNotices tells the console's open inbox pages that a conversation
// changed: one messagingapi.InboxChange on core NATS, on the workspace's
// messagingapi.InboxSubject. Core NATS keeps nothing: with no inbox open,
// the notice is dropped, and a page opened later reads the conversation
// as it is.
type InboxNotices struct {
	nc     *nats.Conn
	prefix string
	log    *zap.Logger
}

// NewInboxNotices publishes on nc under prefix (RPC_SUBJECT_PREFIX).
func NewInboxNotices(nc *nats.Conn, prefix string, log *zap.Logger) *InboxNotices {
	return &InboxNotices{nc: nc, prefix: prefix, log: log}
}

// Changed publishes that the workspace's conversation changed. A notice
// that cannot go is logged and dropped: the change itself is stored, and
// the inbox shows it on its next read.
func (n *InboxNotices) Changed(workspaceID, conversationID string) {
	body, err := json.Marshal(messagingapi.InboxChange{WorkspaceID: workspaceID, ConversationID: conversationID})
	if err == nil {
		err = n.nc.Publish(messagingapi.InboxSubject(n.prefix, workspaceID), body)
	}
	if err != nil {
		n.log.Warn("inbox notice not published", zap.String("conversation_id", conversationID), zap.Error(err))
	}
}
