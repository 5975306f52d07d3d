package app

import (
	"context"
	"time"
)

// purgeBatch bounds one DELETE, so purging a large backlog never holds
// long locks.
const purgeBatch = 5000

// PurgeDeliveries deletes log entries older than the retention and says how
// many went.
func (a *App) PurgeDeliveries(ctx context.Context) (int64, error) {
	cutoff := a.now().Add(-a.cfg.Retention)
	var total int64
	for {
		n, err := a.deliveries.Purge(ctx, cutoff, purgeBatch)
		total += n
		if err != nil || n < purgeBatch {
			return total, err
		}
	}
}

// RunRetention purges the log now and then every interval until ctx ends.
// Every instance runs it; concurrent purges only delete the same rows.
func (a *App) RunRetention(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := a.PurgeDeliveries(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			a.obs.PurgeFailed(err)
		case n > 0:
			a.obs.DeliveryLogPurged(n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
