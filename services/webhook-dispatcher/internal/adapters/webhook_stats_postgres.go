package adapters

import (
	"context"
	"fmt"
	"time"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/webhook"
)

// CountPaused counts the paused webhooks of every workspace (the
// paused-webhooks gauge).
func (s *WebhookStore) CountPaused(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var n int64
	if err := s.db.WithContext(ctx).Model(&webhookRow{}).Where("status = ?", string(webhook.StatusPaused)).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count paused webhooks: %w", err)
	}
	return n, nil
}
