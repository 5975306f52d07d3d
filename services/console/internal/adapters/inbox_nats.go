package adapters

import (
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

// InboxChanges hears messaging's inbox notices (messagingapi.InboxChange
// on core NATS) for the console's open inbox pages. Each open page holds
// one subscription to its workspace's subject, on every console instance
// alike: a notice reaches the pages wherever they are connected.
type InboxChanges struct {
	nc     *nats.Conn
	prefix string
}

// NewInboxChanges subscribes on nc under prefix (RPC_SUBJECT_PREFIX, as
// messaging publishes).
func NewInboxChanges(nc *nats.Conn, prefix string) *InboxChanges {
	return &InboxChanges{nc: nc, prefix: prefix}
}

// Subscribe calls fn with each change of the workspace's conversations
// until the returned stop is called. fn runs on the subscription's own
// goroutine, one notice at a time.
func (s *InboxChanges) Subscribe(workspaceID string, fn func(messagingapi.InboxChange)) (stop func(), err error) {
	sub, err := s.nc.Subscribe(messagingapi.InboxSubject(s.prefix, workspaceID), func(m *nats.Msg) {
		var c messagingapi.InboxChange
		if json.Unmarshal(m.Data, &c) == nil && c.WorkspaceID == workspaceID {
			fn(c)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to inbox changes: %w", err)
	}
	// The subscription is in place on the server before the page is told
	// it is live, so no change after that is missed.
	if err := s.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe to inbox changes: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
