package adapters

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// IngressReceiptStore keeps messaging.ingress_receipts short: a delivery's
// key only needs remembering while its platform may still redeliver it.
type IngressReceiptStore struct {
	db *gorm.DB
}

// NewIngressReceiptStore returns a store on gdb.
func NewIngressReceiptStore(gdb *gorm.DB) *IngressReceiptStore {
	return &IngressReceiptStore{db: gdb}
}

// Prune deletes the receipts of deliveries received before cutoff (by the
// received_at index) and returns how many.
func (s *IngressReceiptStore) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM messaging.ingress_receipts WHERE received_at < ?`, cutoff)
	if res.Error != nil {
		return 0, fmt.Errorf("prune ingress receipts: %w", res.Error)
	}
	return res.RowsAffected, nil
}
