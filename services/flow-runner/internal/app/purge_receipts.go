package app

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// receiptPurgeBatch bounds one delete, so that a large backlog is purged in
// short statements rather than one long lock.
const receiptPurgeBatch = 10000

// RunReceiptRetention deletes expired idempotency receipts now and then
// every interval until ctx ends; their keys answer nothing any more, so
// they only take room.
func (a *App) RunReceiptRetention(ctx context.Context, interval time.Duration, log *zap.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var total int64
		for {
			n, err := a.runs.PurgeReceipts(ctx, receiptPurgeBatch)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("purge idempotency receipts", zap.Error(err))
				}
				break
			}
			total += n
			if n < receiptPurgeBatch {
				break
			}
		}
		if total > 0 {
			log.Info("idempotency receipts purged", zap.Int64("deleted", total))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
