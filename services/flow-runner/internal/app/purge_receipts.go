package app

import (
	"context"
	"time"
)

// receiptPurgeBatch bounds one delete, so that a large backlog is purged in
// short statements rather than one long lock.
const receiptPurgeBatch = 10000

// RunReceiptRetention deletes expired idempotency receipts now and then
// every interval until ctx ends; their keys answer nothing any more, so
// they only take room.
func (a *App) RunReceiptRetention(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var total int64
		for {
			n, err := a.runs.PurgeReceipts(ctx, receiptPurgeBatch)
			if err != nil {
				if ctx.Err() == nil {
					a.obs.ReceiptPurgeFailed(err)
				}
				break
			}
			total += n
			if n < receiptPurgeBatch {
				break
			}
		}
		if total > 0 {
			a.obs.ReceiptsPurged(total)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
