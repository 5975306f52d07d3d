package app

import (
	"context"
	"time"

	"github.com/parleyhq/parley/pkg/paging"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// DeliveryPage is one page of the delivery log and the cursor to the next.
type DeliveryPage struct {
	Deliveries []*delivery.Delivery
	// NextBefore, passed back as q.Before, gives the next page; nil on the
	// last page.
	NextBefore *time.Time
}

// ListDeliveries returns a page of the workspace's delivery log, newest
// first (GET /v1/webhook/deliveries). q.Limit is paging.DefaultLimit when
// zero and otherwise within 1..paging.MaxLimit (the port checks it); q.At
// is ignored. Deliveries created in the same microsecond are never split
// across pages (paging.Paginate), so following NextBefore meets each one
// exactly once. Only the retention is listed: an older delivery the
// hourly purge has not deleted yet is not shown.
func (a *App) ListDeliveries(ctx context.Context, workspaceID string, q delivery.ListQuery) (DeliveryPage, error) {
	if q.Limit == 0 {
		q.Limit = paging.DefaultLimit
	}
	if a.cfg.Retention > 0 {
		since := a.now().Add(-a.cfg.Retention)
		q.Since = &since
	}
	fetch := func(before, at *time.Time, limit int) ([]*delivery.Delivery, error) {
		p := q
		p.Before, p.At, p.Limit = before, at, limit
		return a.deliveries.List(ctx, workspaceID, p)
	}
	stamp := func(d *delivery.Delivery) time.Time { return d.CreatedAt }
	rows, next, err := paging.Paginate(q.Before, q.Limit, fetch, stamp)
	if err != nil {
		return DeliveryPage{}, err
	}
	return DeliveryPage{Deliveries: rows, NextBefore: next}, nil
}
